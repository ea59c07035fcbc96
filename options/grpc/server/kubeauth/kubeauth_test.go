package kubeauth_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/workwire/sdk-go/internal/testsupport/testcerts"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc"
	"github.com/workwire/sdk-go/options/grpc/grpctest"
	"github.com/workwire/sdk-go/options/grpc/server"
	"github.com/workwire/sdk-go/options/grpc/server/kubeauth"
	"github.com/workwire/sdk-go/options/transporttest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeCluster answers TokenReviews from tokens and SubjectAccessReviews
// from grants (user → "resource/name").
func fakeCluster(tokens map[string]authenticationv1.UserInfo, grants map[string][]string) *fake.Clientset {
	c := fake.NewClientset()
	c.PrependReactor("create", "tokenreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		tr := a.(clienttesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		if u, ok := tokens[tr.Spec.Token]; ok {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: u}
		} else {
			tr.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
		}
		return true, tr, nil
	})
	c.PrependReactor("create", "subjectaccessreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		sar := a.(clienttesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		ra := sar.Spec.ResourceAttributes
		for _, g := range grants[sar.Spec.User] {
			if ra.Group == kubeauth.DefaultGroup && g == ra.Resource+"/"+ra.Name && (ra.Verb == "publish" || ra.Verb == "subscribe") {
				sar.Status.Allowed = true
			}
		}
		if !sar.Status.Allowed {
			sar.Status.Reason = "no RBAC rule"
		}
		return true, sar, nil
	})
	return c
}

func TestTokenReview(t *testing.T) {
	c := fakeCluster(map[string]authenticationv1.UserInfo{
		"tok-1": {Username: "system:serviceaccount:cluster1:agent", Groups: []string{"system:serviceaccounts"}, UID: "u1",
			Extra: map[string]authenticationv1.ExtraValue{"k": {"v"}}},
	}, nil)
	a := kubeauth.NewTokenReview(c, kubeauth.WithAudiences("workwire"))
	ctx := context.Background()
	id, err := a.Authenticate(ctx, server.Credentials{Token: "tok-1"})
	if err != nil {
		t.Fatal(err)
	}
	if id.User != "system:serviceaccount:cluster1:agent" || id.UID != "u1" || len(id.Groups) != 1 || id.Extra["k"][0] != "v" {
		t.Errorf("identity %+v", id)
	}
	if _, err := a.Authenticate(ctx, server.Credentials{Token: "forged"}); err == nil {
		t.Error("a forged token was accepted")
	}
	if _, err := a.Authenticate(ctx, server.Credentials{}); !errors.Is(err, server.ErrNoCredentials) {
		t.Errorf("no token: %v, want ErrNoCredentials", err)
	}
	var audiences []string
	c.PrependReactor("create", "tokenreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		audiences = a.(clienttesting.CreateAction).GetObject().(*authenticationv1.TokenReview).Spec.Audiences
		return true, nil, errors.New("apiserver down")
	})
	_, err = a.Authenticate(ctx, server.Credentials{Token: "tok-1"})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("API failure: %v, want Unavailable", err)
	}
	if len(audiences) != 1 || audiences[0] != "workwire" {
		t.Errorf("audiences %v", audiences)
	}
}

func TestSubjectAccessReview(t *testing.T) {
	c := fakeCluster(nil, map[string][]string{"agent1": {"clusters/cluster1"}, "hub": {"sources/hub"}})
	a := kubeauth.NewSubjectAccessReview(c, nil)
	ctx := context.Background()
	for _, tc := range []struct {
		user string
		req  server.Request
		ok   bool
	}{
		{"agent1", server.Request{Verb: server.VerbSubscribe, Role: options.RoleSpec, Cluster: "cluster1"}, true},
		{"agent1", server.Request{Verb: server.VerbSubscribe, Role: options.RoleSpec, Cluster: "cluster2"}, false},
		{"agent1", server.Request{Verb: server.VerbPublish, Role: options.RoleStatus, Source: "hub", Cluster: "cluster1"}, true},
		{"agent1", server.Request{Verb: server.VerbPublish, Role: options.RoleStatus, Source: "hub", Cluster: "cluster2"}, false},
		{"agent1", server.Request{Verb: server.VerbPublish, Role: options.RoleSpec, Source: "hub", Cluster: "cluster1"}, false},
		{"hub", server.Request{Verb: server.VerbPublish, Role: options.RoleSpec, Source: "hub", Cluster: "cluster1"}, true},
		{"hub", server.Request{Verb: server.VerbSubscribe, Role: options.RoleStatus, Source: "hub"}, true},
		{"hub", server.Request{Verb: server.VerbSubscribe, Role: options.RoleStatus, Source: "other"}, false},
		{"hub", server.Request{Verb: server.VerbPublish, Role: options.RoleSpecResync, Cluster: "cluster1"}, false},
	} {
		err := a.Authorize(ctx, server.Identity{User: tc.user}, tc.req)
		if tc.ok && err != nil {
			t.Errorf("%s %+v: %v, want allowed", tc.user, tc.req, err)
		}
		if !tc.ok && !errors.Is(err, server.ErrDenied) {
			t.Errorf("%s %+v: %v, want ErrDenied", tc.user, tc.req, err)
		}
	}
	c.PrependReactor("create", "subjectaccessreviews", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("apiserver down")
	})
	err := a.Authorize(ctx, server.Identity{User: "hub"}, server.Request{Verb: server.VerbSubscribe, Role: options.RoleStatus, Source: "hub"})
	if errors.Is(err, server.ErrDenied) || status.Code(err) != codes.Unavailable {
		t.Errorf("API failure: %v, want Unavailable (not a denial)", err)
	}
}

// Through a broker: tokens checked by TokenReview, routes by
// SubjectAccessReview.
func TestBrokerWithKubernetesAuth(t *testing.T) {
	c := fakeCluster(map[string]authenticationv1.UserInfo{"agent1-token": {Username: "agent1"}}, map[string][]string{"agent1": {"clusters/cluster1"}})
	ca := testcerts.NewCA(t)
	cert := ca.Server(t, "broker")
	srv := grpctest.NewServerWithConfig(t, server.Config{TLS: server.TLSConfig{CertFile: cert.CertFile, KeyFile: cert.KeyFile}},
		server.WithAuthenticator(kubeauth.NewTokenReview(c)), server.WithAuthorizer(kubeauth.NewSubjectAccessReview(c, nil)))
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("agent1-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := srv.Config()
	cfg.TLS, cfg.TokenFile = options.TLSConfig{CAFile: ca.CAFile()}, tokenFile
	start := func(cluster string) error {
		tr, err := grpc.New(cfg, grpc.WithLogger(logr.Discard()))
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close(context.Background())
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return tr.Start(ctx, options.AgentSubscriptions(cluster, nil), transporttest.NewRecorder())
	}
	if err := start("cluster1"); err != nil {
		t.Errorf("cluster1's agent: %v", err)
	}
	if err := start("cluster2"); status.Code(err) != codes.PermissionDenied {
		t.Errorf("cluster1's agent subscribing to cluster2: %v, want PermissionDenied", err)
	}
}
