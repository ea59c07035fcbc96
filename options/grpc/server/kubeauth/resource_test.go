package kubeauth_test

import (
	"context"
	"errors"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/internal/testsupport/kubetest"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc/server"
	"github.com/workwire/sdk-go/options/grpc/server/kubeauth"
)

const (
	clusters = "cluster.open-cluster-management.io.v1.managedclusters"
	csrs     = "certificates.k8s.io.v1.certificatesigningrequests"
	leases   = "coordination.k8s.io.v1.leases"
	works    = "io.open-cluster-management.works.v1alpha1.manifestbundles"
	tokens   = "authentication.k8s.io.v1.tokenrequests"
)

// With ResourceAttributes a kube-apiserver's RBAC decides type by type, as
// OCM's hub does: a bootstrap identity granted what joining takes may
// create its ManagedCluster and CSRs and watch them, and nothing else — not
// subscribe to works, not renew a lease; a cluster's agent may renew the
// leases of its own namespace only.
func TestResourceAttributesLetRBACDecideTypeByType(t *testing.T) {
	cfg := kubetest.Start(t)
	kube := kubernetes.NewForConfigOrDie(cfg)
	kubetest.CreateNamespaces(t, cfg, "cluster1", "cluster2")
	ctx := context.Background()
	rbac := kube.RbacV1()
	join := []rbacv1.PolicyRule{
		{APIGroups: []string{"cluster.open-cluster-management.io"}, Resources: []string{"managedclusters"}, Verbs: []string{"create", "get", "list", "watch"}},
		{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"create", "get", "list", "watch"}},
	}
	if _, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "bootstrap"}, Rules: join}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bootstrap"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "bootstrap"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:bootstrappers"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.Roles("cluster1").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "agent"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch", "update"}},
		{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, Verbs: []string{"create", "subscribe"}},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.RoleBindings("cluster1").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "agent"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:open-cluster-management:cluster1"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	authz := kubeauth.NewSubjectAccessReview(kube, kubeauth.ResourceAttributes)
	bootstrap := server.Identity{User: "system:bootstrap:abc123", Groups: []string{"system:bootstrappers"}}
	agent := server.Identity{User: "system:open-cluster-management:cluster1:agent1", Groups: []string{"system:open-cluster-management:cluster1"}}
	publish := func(cluster, dt string, sub types.SubResource, action types.Action) server.Request {
		return server.Request{Verb: server.VerbPublish, Role: options.RoleStatus, Source: server.DefaultSourceID, Cluster: cluster, DataType: dt, SubResource: sub, Action: action}
	}
	subscribe := func(cluster, dt string) server.Request {
		return server.Request{Verb: server.VerbSubscribe, Role: options.RoleSpec, Cluster: cluster, DataType: dt}
	}
	for _, tc := range []struct {
		name  string
		id    server.Identity
		req   server.Request
		allow bool
	}{
		{"bootstrap creates its cluster", bootstrap, publish("cluster1", clusters, types.SubResourceSpec, types.CreateRequest), true},
		{"bootstrap creates a CSR", bootstrap, publish("cluster1", csrs, types.SubResourceSpec, types.CreateRequest), true},
		{"bootstrap watches CSRs", bootstrap, subscribe("cluster1", csrs), true},
		{"bootstrap subscribes to works", bootstrap, subscribe("cluster1", works), false},
		{"bootstrap subscribes to every type", bootstrap, subscribe("cluster1", ""), false},
		{"bootstrap renews a lease", bootstrap, publish("cluster1", leases, types.SubResourceSpec, types.UpdateRequest), false},
		{"bootstrap updates its cluster's status", bootstrap, publish("cluster1", clusters, types.SubResourceStatus, types.UpdateRequest), false},
		{"the agent renews its lease", agent, publish("cluster1", leases, types.SubResourceSpec, types.UpdateRequest), true},
		{"the agent renews another cluster's lease", agent, publish("cluster2", leases, types.SubResourceSpec, types.UpdateRequest), false},
		{"the agent asks for a token", agent, publish("cluster1", tokens, types.SubResourceSpec, types.CreateRequest), true},
		{"the agent subscribes to its tokens", agent, subscribe("cluster1", tokens), true},
		{"the agent asks for another cluster's token", agent, publish("cluster2", tokens, types.SubResourceSpec, types.CreateRequest), false},
		{"bootstrap asks for a token", bootstrap, publish("cluster1", tokens, types.SubResourceSpec, types.CreateRequest), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := authz.Authorize(ctx, tc.id, tc.req)
			switch {
			case tc.allow && err != nil:
				t.Errorf("refused: %v", err)
			case !tc.allow && !errors.Is(err, server.ErrDenied):
				t.Errorf("%v, want ErrDenied", err)
			}
		})
	}
}

func TestResourceAttributesOfEachRequest(t *testing.T) {
	for _, tc := range []struct {
		req  server.Request
		want authorizationv1.ResourceAttributes
	}{
		{server.Request{Verb: server.VerbPublish, Role: options.RoleStatus, Source: "s", Cluster: "c1", DataType: clusters, SubResource: types.SubResourceStatus, Action: types.UpdateRequest},
			authorizationv1.ResourceAttributes{Namespace: "c1", Name: "c1", Verb: "update", Group: "cluster.open-cluster-management.io", Resource: "managedclusters", Subresource: "status"}},
		{server.Request{Verb: server.VerbPublish, Role: options.RoleSpecResync, Cluster: "c1", DataType: csrs, SubResource: types.SubResourceSpec, Action: types.ResyncRequest},
			authorizationv1.ResourceAttributes{Namespace: "c1", Verb: "list", Group: "certificates.k8s.io", Resource: "certificatesigningrequests"}},
		{server.Request{Verb: server.VerbPublish, Role: options.RoleStatus, Source: "s", Cluster: "c1", DataType: tokens, SubResource: types.SubResourceSpec, Action: types.CreateRequest},
			authorizationv1.ResourceAttributes{Namespace: "c1", Verb: "create", Resource: "serviceaccounts", Subresource: "token"}},
		{server.Request{Verb: server.VerbSubscribe, Role: options.RoleSpec, Cluster: "c1", DataType: tokens},
			authorizationv1.ResourceAttributes{Namespace: "c1", Verb: "subscribe", Resource: "serviceaccounts", Subresource: "token"}},
		{server.Request{Verb: server.VerbSubscribe, Role: options.RoleSpec, Cluster: "c1"},
			authorizationv1.ResourceAttributes{Namespace: "c1", Verb: "watch", Group: "*", Resource: "*"}},
		{server.Request{Verb: server.VerbPublish, Role: options.RoleSpec, Source: "hub", Cluster: "c1", DataType: works, SubResource: types.SubResourceSpec, Action: types.CreateRequest},
			kubeauth.DefaultAttributes(server.Request{Verb: server.VerbPublish, Role: options.RoleSpec, Source: "hub", Cluster: "c1"})},
	} {
		if got := kubeauth.ResourceAttributes(tc.req); got != tc.want {
			t.Errorf("%+v:\n got %+v\nwant %+v", tc.req, got, tc.want)
		}
	}
}
