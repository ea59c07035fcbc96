package protocol

import (
	"fmt"

	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options"
)

// DeriveRoute returns the route evt's own attributes give: the role from its
// type (spec or status, resync or not), the cluster from its clustername
// extension, and the source from its originalsource extension (status) or
// its source attribute (spec and status resync). A spec resync names no
// source and a status resync no cluster. A broker routes by it and a
// client takes what arrives as sent on it, so the two always agree. It
// fails on a malformed type; the route it returns may still lack an ID its
// role needs (see options.Route.Validate).
func DeriveRoute(evt *CloudEvent) (options.Route, error) {
	et, err := types.ParseEventType(evt.GetType())
	if err != nil {
		return options.Route{}, err
	}
	var r options.Route
	switch {
	case et.SubResource == types.SubResourceSpec && et.Action == types.ResyncRequest:
		r.Role = options.RoleSpecResync
	case et.SubResource == types.SubResourceSpec:
		r.Role, r.Source = options.RoleSpec, evt.GetSource()
	case et.Action == types.ResyncRequest:
		r.Role, r.Source = options.RoleStatusResync, evt.GetSource()
	default:
		r.Role = options.RoleStatus
		src, err := StringAttribute(evt, types.ExtOriginalSource)
		if err != nil {
			return options.Route{}, err
		}
		r.Source = src
	}
	if r.Role != options.RoleStatusResync {
		c, err := StringAttribute(evt, types.ExtClusterName)
		if err != nil {
			return options.Route{}, err
		}
		r.Cluster = c
	}
	return r, nil
}

// StringAttribute returns the string value of evt's attribute or extension
// name, under OCM's key ("ce-<name>") or else its bare name; "" when it is
// absent, and an error when it is not a string.
func StringAttribute(evt *CloudEvent, name string) (string, error) {
	v := evt.GetAttributes()[attrPrefix+name]
	if v == nil {
		v = evt.GetAttributes()[name]
	}
	switch a := v.GetAttr().(type) {
	case *CloudEventAttributeValue_CeString:
		return a.CeString, nil
	case nil:
		return "", nil
	default:
		return "", fmt.Errorf("attribute %s: want a string, got %T", name, a)
	}
}
