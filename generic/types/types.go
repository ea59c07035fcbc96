package types

import (
	"errors"
	"fmt"
	"strings"
)

// SubResource names the part of a resource an event carries.
type SubResource string

const (
	// SubResourceSpec marks events that carry what a source wants on a cluster.
	SubResourceSpec SubResource = "spec"
	// SubResourceStatus marks events that carry what an agent observed.
	SubResourceStatus SubResource = "status"
)

// Action says what the receiver of an event is asked to do.
type Action string

const (
	// CreateRequest asks the receiver to create a resource.
	CreateRequest Action = "create_request"
	// UpdateRequest asks the receiver to update a resource (status events always use it).
	UpdateRequest Action = "update_request"
	// DeleteRequest asks the receiver to delete a resource.
	DeleteRequest Action = "delete_request"
	// ResyncRequest asks the receiver to send what the sender lacks; its payload is
	// a ResourceVersionList (spec) or a StatusHashList (status).
	ResyncRequest Action = "resync_request"
	// ResyncResponse is what OCM peers (open-cluster-management.io/sdk-go)
	// answer a resync request with: a source's spec.resync_response is an
	// upsert, or a delete when the deletiontimestamp extension is set; an
	// agent's status.resync_response is a status update. It is accepted on
	// decode only: the clients hand it to handlers as an UpdateRequest, and
	// never send it.
	ResyncResponse Action = "resync_response"
)

// ErrInvalidType is wrapped by every error ParseEventType and ParseDataType return.
var ErrInvalidType = errors.New("invalid cloudevents type")

// DataType identifies the kind of resource an event carries:
// "<reverse group>.<version>.<resource>", for example
// "io.open-cluster-management.works.v1alpha1.manifestbundles".
type DataType struct {
	// Group is the reverse-DNS group, e.g. "io.open-cluster-management.works".
	Group string
	// Version is the API version, e.g. "v1alpha1".
	Version string
	// Resource is the lower-case plural resource name, e.g. "manifestbundles".
	Resource string
}

// String returns "<group>.<version>.<resource>".
func (d DataType) String() string {
	return d.Group + "." + d.Version + "." + d.Resource
}

// IsZero reports whether d is the zero DataType.
func (d DataType) IsZero() bool { return d == DataType{} }

// Singular returns d with the trailing "s" of its resource removed, the form
// some peers send ("manifestbundle" for "manifestbundles"). Decoders
// accept both forms; encoders emit the plural.
func (d DataType) Singular() DataType {
	d.Resource = strings.TrimSuffix(d.Resource, "s")
	return d
}

// Validate reports whether every part of d is well formed: the group
// dot-separated tokens, the version and resource one token each.
func (d DataType) Validate() error {
	var errs []error
	if err := validateToken(d.Group, true); err != nil {
		errs = append(errs, fmt.Errorf("group: %w", err))
	}
	if err := validateToken(d.Version, false); err != nil {
		errs = append(errs, fmt.Errorf("version: %w", err))
	}
	if err := validateToken(d.Resource, false); err != nil {
		errs = append(errs, fmt.Errorf("resource: %w", err))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: data type %q: %w", ErrInvalidType, d.String(), errors.Join(errs...))
	}
	return nil
}

// ParseDataType parses "<reverse group>.<version>.<resource>". The group may
// contain dots; version and resource may not.
func ParseDataType(s string) (DataType, error) {
	i := strings.LastIndexByte(s, '.')
	if i < 0 {
		return DataType{}, fmt.Errorf("%w: data type %q: want <group>.<version>.<resource>", ErrInvalidType, s)
	}
	j := strings.LastIndexByte(s[:i], '.')
	if j < 0 {
		return DataType{}, fmt.Errorf("%w: data type %q: want <group>.<version>.<resource>", ErrInvalidType, s)
	}
	d := DataType{Group: s[:j], Version: s[j+1 : i], Resource: s[i+1:]}
	if err := d.Validate(); err != nil {
		return DataType{}, err
	}
	return d, nil
}

// EventType is a parsed CloudEvents "type" attribute:
// "<data type>.<subresource>.<action>".
type EventType struct {
	DataType    DataType
	SubResource SubResource
	Action      Action
}

// String formats t as the CloudEvents "type" attribute.
func (t EventType) String() string {
	return t.DataType.String() + "." + string(t.SubResource) + "." + string(t.Action)
}

// Validate reports every malformed or unknown part of t.
func (t EventType) Validate() error {
	var errs []error
	if err := t.DataType.Validate(); err != nil {
		errs = append(errs, err)
	}
	switch t.SubResource {
	case SubResourceSpec, SubResourceStatus:
	default:
		errs = append(errs, fmt.Errorf("%w: unknown subresource %q (want spec or status)", ErrInvalidType, t.SubResource))
	}
	switch t.Action {
	case CreateRequest, UpdateRequest, DeleteRequest, ResyncRequest, ResyncResponse:
	default:
		errs = append(errs, fmt.Errorf("%w: unknown action %q (want create_request, update_request, delete_request, resync_request or resync_response)", ErrInvalidType, t.Action))
	}
	return errors.Join(errs...)
}

// ParseEventType parses and validates a CloudEvents "type" attribute. A
// malformed type is returned as an error wrapping ErrInvalidType; it never panics.
func ParseEventType(s string) (EventType, error) {
	// Split from the right: the group may contain dots, nothing else may.
	parts := [4]string{}
	rest := s
	for k := 3; k >= 0; k-- {
		i := strings.LastIndexByte(rest, '.')
		if i < 0 {
			return EventType{}, fmt.Errorf("%w: %q: want <group>.<version>.<resource>.<subresource>.<action>", ErrInvalidType, s)
		}
		parts[k] = rest[i+1:]
		rest = rest[:i]
	}
	t := EventType{
		DataType:    DataType{Group: rest, Version: parts[0], Resource: parts[1]},
		SubResource: SubResource(parts[2]),
		Action:      Action(parts[3]),
	}
	if err := t.Validate(); err != nil {
		return EventType{}, fmt.Errorf("parse %q: %w", s, err)
	}
	return t, nil
}

// validateToken accepts what Kubernetes accepts in group, version and
// resource names: lower-case letters, digits, '-' and '_' (OCM's types use
// '_' in actions only, but data types from other projects may use it);
// dotted, several such tokens separated by dots, as a group is.
func validateToken(s string, dotted bool) error {
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || dotted && s[i] == '.' {
			if i == start {
				return errors.New("empty part")
			}
			start = i + 1
			continue
		}
		switch c := s[i]; {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
		default:
			return fmt.Errorf("%q has character %q (want lower-case letters, digits, '-' or '_')", s, c)
		}
	}
	return nil
}
