package hub_test

import (
	"context"
	"errors"
	"testing"

	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc/server"
	"github.com/workwire/sdk-go/registration/hub"
	"github.com/workwire/sdk-go/registration/kubeservice"
)

func TestTheAuthorizerLetsAgentsAndBootstrapIdentitiesDoWhatOCMsRBACDoes(t *testing.T) {
	const works = "io.open-cluster-management.works.v1alpha1.manifestbundles"
	clusters := kubeservice.ManagedClusterCodec.DataType().String()
	csrs := kubeservice.CSRCodec.DataType().String()
	leases := kubeservice.LeaseCodec.DataType().String()
	agent := server.Identity{User: kubeservice.AgentCommonNamePrefix + "cluster1:agent1"}
	bootstrap := server.Identity{User: "system:bootstrap:abc123", Groups: []string{"system:bootstrappers"}}
	stranger := server.Identity{User: "someone"}
	publish := func(cluster, dt string, sub types.SubResource, action types.Action) server.Request {
		return server.Request{Verb: server.VerbPublish, Role: options.RoleStatus, Cluster: cluster, DataType: dt, SubResource: sub, Action: action}
	}
	subscribe := func(cluster, dt string) server.Request {
		return server.Request{Verb: server.VerbSubscribe, Role: options.RoleSpec, Cluster: cluster, DataType: dt}
	}
	a := hub.Authorizer{Bootstrap: []string{"group:system:bootstrappers"}}
	for _, c := range []struct {
		name  string
		id    server.Identity
		req   server.Request
		allow bool
	}{
		{"an agent subscribes to its works", agent, subscribe("cluster1", works), true},
		{"an agent renews its lease", agent, publish("cluster1", leases, types.SubResourceSpec, types.UpdateRequest), true},
		{"an agent subscribes to another cluster's works", agent, subscribe("cluster2", works), false},
		{"an agent publishes specs as a source", agent, server.Request{Verb: server.VerbPublish, Role: options.RoleSpec, Source: "hub", Cluster: "cluster1", DataType: works}, false},
		{"bootstrap creates its cluster", bootstrap, publish("cluster1", clusters, types.SubResourceSpec, types.CreateRequest), true},
		{"bootstrap creates a CSR", bootstrap, publish("cluster1", csrs, types.SubResourceSpec, types.CreateRequest), true},
		{"bootstrap watches CSRs", bootstrap, subscribe("cluster1", csrs), true},
		{"bootstrap asks for its CSRs' resync", bootstrap, publish("cluster1", csrs, types.SubResourceSpec, types.ResyncRequest), true},
		{"bootstrap subscribes to works", bootstrap, subscribe("cluster1", works), false},
		{"bootstrap subscribes to every type", bootstrap, subscribe("cluster1", ""), false},
		{"bootstrap updates its cluster's status", bootstrap, publish("cluster1", clusters, types.SubResourceStatus, types.UpdateRequest), false},
		{"bootstrap renews a lease", bootstrap, publish("cluster1", leases, types.SubResourceSpec, types.UpdateRequest), false},
		{"a stranger subscribes", stranger, subscribe("cluster1", csrs), false},
		{"a forged agent name without an agent part", server.Identity{User: kubeservice.AgentCommonNamePrefix + "cluster1"}, subscribe("cluster1", works), false},
		{"an add-on's identity under the prefix", server.Identity{User: kubeservice.AgentCommonNamePrefix + "cluster:c1:addon:x:agent:y"}, subscribe("cluster", works), false},
	} {
		err := a.Authorize(context.Background(), c.id, c.req)
		if c.allow && err != nil || !c.allow && !errors.Is(err, server.ErrDenied) {
			t.Errorf("%s: %v, want allowed %v", c.name, err, c.allow)
		}
	}
}
