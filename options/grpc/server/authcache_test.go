package server_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	grpclib "google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc/grpctest"
	"github.com/workwire/sdk-go/options/grpc/protocol"
	"github.com/workwire/sdk-go/options/grpc/server"
)

// countingAuth counts the calls that reach an authenticator and an
// authorizer behind the server's caches. The authorizer cannot decide for
// cluster "unreachable", as when its apiserver is down.
type countingAuth struct {
	authn server.Authenticator
	authz server.Authorizer

	mu            sync.Mutex
	authnCalls    int
	authzRequests map[server.Request]int
}

func (c *countingAuth) Authenticate(ctx context.Context, creds server.Credentials) (server.Identity, error) {
	c.mu.Lock()
	c.authnCalls++
	c.mu.Unlock()
	return c.authn.Authenticate(ctx, creds)
}

func (c *countingAuth) Authorize(ctx context.Context, id server.Identity, req server.Request) error {
	c.mu.Lock()
	c.authzRequests[req]++
	c.mu.Unlock()
	if req.Cluster == "unreachable" {
		return errors.New("apiserver unreachable")
	}
	return c.authz.Authorize(ctx, id, req)
}

func (c *countingAuth) calls(req server.Request) (authn, authz int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.authnCalls, c.authzRequests[req]
}

// Identities and decisions are cached: repeated calls with the same
// credentials and request reach the authenticator and authorizer once,
// denials included; a failure to decide is asked again every time.
func TestAuthDecisionsAreCached(t *testing.T) {
	auth := &countingAuth{
		authn:         server.StaticAuthenticator{Tokens: map[string]server.Identity{"token-a": {User: "source-a"}}},
		authz:         server.StaticAuthorizer{Sources: map[string][]string{"source-a": {"A"}}},
		authzRequests: map[server.Request]int{},
	}
	b := newSecureBroker(t, server.WithAuthenticator(auth), server.WithAuthorizer(auth))
	a := b.source(t, "token-a")
	mustStart(t, a, options.SourceSubscriptions("A", []string{dataType}))

	publish := func(source, cluster string) error {
		evt := event("spec-"+cluster, "spec.create_request", map[string]string{types.ExtClusterName: cluster})
		return send(a, options.Route{Role: options.RoleSpec, Source: source, Cluster: cluster}, evt)
	}
	req := func(source, cluster string) server.Request {
		return server.Request{Verb: server.VerbPublish, Role: options.RoleSpec, Source: source, Cluster: cluster, DataType: dataType,
			SubResource: types.SubResourceSpec, Action: types.CreateRequest}
	}
	const n = 5
	for range n {
		if err := publish("A", "cluster1"); err != nil {
			t.Fatalf("source A publishing its spec: %v", err)
		}
		if err := publish("B", "cluster1"); status.Code(err) != codes.PermissionDenied {
			t.Fatalf("source A publishing as B: %v, want PermissionDenied", err)
		}
		if err := publish("A", "unreachable"); status.Code(err) != codes.Unavailable {
			t.Fatalf("a publish the authorizer cannot decide: %v, want Unavailable", err)
		}
	}
	if authn, allowed := auth.calls(req("A", "cluster1")); authn != 1 || allowed != 1 {
		t.Errorf("%d allowed publishes: %d authentications and %d authorizations, want 1 and 1", n, authn, allowed)
	}
	if _, denied := auth.calls(req("B", "cluster1")); denied != 1 {
		t.Errorf("%d denied publishes: %d authorizations, want 1 (denials are cached)", n, denied)
	}
	if _, undecided := auth.calls(req("A", "unreachable")); undecided != n {
		t.Errorf("%d undecided publishes: %d authorizations, want %d (failures to decide are not cached)", n, undecided, n)
	}
}

// switchAuthorizer allows source-a as source A until it is told not to.
type switchAuthorizer struct{ revoked atomic.Bool }

func (a *switchAuthorizer) Authorize(_ context.Context, id server.Identity, req server.Request) error {
	if a.revoked.Load() || id.User != "source-a" || req.Source != "A" {
		return fmt.Errorf("%w: %s may not act as %q", server.ErrDenied, id.User, req.Source)
	}
	return nil
}

// A grant taken back ends the subscriptions it allowed within about
// AuthCacheTTL: open streams are authorized again at that interval.
func TestARevokedSubscriptionEnds(t *testing.T) {
	authz := &switchAuthorizer{}
	srv := grpctest.NewServerWithConfig(t, server.Config{AuthCacheTTL: options.Duration(100 * time.Millisecond)},
		server.WithAuthenticator(server.StaticAuthenticator{Tokens: map[string]server.Identity{"token-a": {User: "source-a"}}}),
		server.WithAuthorizer(authz))
	conn, err := grpclib.NewClient(srv.Addr(), grpclib.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer token-a")
	stream, err := protocol.NewCloudEventServiceClient(conn).Subscribe(ctx, &protocol.SubscriptionRequest{Source: "A", DataTypes: []string{dataType}})
	if err != nil {
		t.Fatal(err)
	}
	if md, err := stream.Header(); err != nil || len(md.Get(protocol.HeaderSubscriptionID)) != 1 {
		t.Fatalf("want the subscription's headers, got %v, %v", md, err)
	}
	authz.revoked.Store(true)
	for {
		_, err := stream.Recv()
		if err == nil {
			continue // a heartbeat
		}
		if status.Code(err) != codes.PermissionDenied {
			t.Fatalf("the stream ended with %v, want PermissionDenied", err)
		}
		return
	}
}
