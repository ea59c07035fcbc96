package server_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/internal/testsupport/testcerts"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc"
	"github.com/workwire/sdk-go/options/grpc/grpctest"
	"github.com/workwire/sdk-go/options/grpc/server"
	"github.com/workwire/sdk-go/options/transporttest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const dataType = "io.open-cluster-management.works.v1alpha1.manifestbundles"

// secureBroker is a broker with TLS, client certificates and tokens. The
// agent of cluster1 and of cluster2 authenticate by certificate; sources A
// and B by token.
type secureBroker struct {
	srv *grpctest.Server
	ca  *testcerts.CA
	dir string
}

func newSecureBroker(t *testing.T, opts ...server.Option) *secureBroker {
	return newSecureBrokerWithConfig(t, server.Config{}, opts...)
}

// newSecureBrokerWithConfig is newSecureBroker with cfg, whose TLS it sets.
func newSecureBrokerWithConfig(t *testing.T, cfg server.Config, opts ...server.Option) *secureBroker {
	ca := testcerts.NewCA(t)
	cert := ca.Server(t, "broker")
	cfg.TLS = server.TLSConfig{CertFile: cert.CertFile, KeyFile: cert.KeyFile, ClientCAFile: ca.CAFile()}
	srv := grpctest.NewServerWithConfig(t, cfg, append([]server.Option{
		server.WithAuthenticator(server.AnyAuthenticator(
			server.StaticAuthenticator{Tokens: map[string]server.Identity{
				"token-a": {User: "source-a"}, "token-b": {User: "source-b"},
			}},
			server.CertificateAuthenticator{},
		)),
		server.WithAuthorizer(server.StaticAuthorizer{
			Sources:  map[string][]string{"source-a": {"A"}, "source-b": {"B"}},
			Clusters: map[string][]string{"agent-cluster1": {"cluster1"}, "group:agents-2": {"cluster2"}},
		}),
	}, opts...)...)
	return &secureBroker{srv: srv, ca: ca, dir: t.TempDir()}
}

func (b *secureBroker) config() grpc.Config {
	cfg := b.srv.Config()
	cfg.TLS = options.TLSConfig{CAFile: b.ca.CAFile()}
	return cfg
}

// agent returns a transport with cluster's client certificate.
func (b *secureBroker) agent(t *testing.T, cn string) options.Transport {
	pair := b.ca.Client(t, cn)
	cfg := b.config()
	cfg.TLS.CertFile, cfg.TLS.KeyFile = pair.CertFile, pair.KeyFile
	return newTransport(t, cfg)
}

// source returns a transport whose token file holds token.
func (b *secureBroker) source(t *testing.T, token string) options.Transport {
	cfg := b.config()
	cfg.TokenFile = filepath.Join(b.dir, token)
	if err := os.WriteFile(cfg.TokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return newTransport(t, cfg)
}

// sourceInline returns a transport that sends token from its config
// (Config.Token, as OCM's files may hold it).
func (b *secureBroker) sourceInline(t *testing.T, token string) options.Transport {
	cfg := b.config()
	cfg.Token = token
	return newTransport(t, cfg)
}

func newTransport(t *testing.T, cfg grpc.Config) options.Transport {
	t.Helper()
	tr, err := grpc.New(cfg, grpc.WithLogger(logr.Discard()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeTransport(t, tr) })
	return tr
}

func closeTransport(t *testing.T, tr options.Transport) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := tr.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func start(t *testing.T, tr options.Transport, subs []options.Subscription) (*transporttest.Recorder, error) {
	t.Helper()
	r := transporttest.NewRecorder()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return r, tr.Start(ctx, subs, r)
}

func mustStart(t *testing.T, tr options.Transport, subs []options.Subscription) *transporttest.Recorder {
	t.Helper()
	r, err := start(t, tr, subs)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return r
}

func event(id, typ string, ext map[string]string) *cloudevents.Event {
	evt := cloudevents.New()
	evt.SetID(id)
	evt.SetSource("test")
	evt.SetType(dataType + "." + typ)
	evt.SetExtension(types.ExtResourceID, "r-"+id)
	for k, v := range ext {
		evt.SetExtension(k, v)
	}
	_ = evt.SetData(cloudevents.ApplicationJSON, map[string]string{"id": id})
	return &evt
}

// send sends evt on r, its attributes set to say r (transporttest.OnRoute).
func send(tr options.Transport, r options.Route, evt *cloudevents.Event) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return tr.Send(ctx, r, transporttest.OnRoute(evt, r))
}

func find(r *transporttest.Recorder, id string) bool {
	for _, d := range r.Deliveries() {
		if d.Event.ID() == id {
			return true
		}
	}
	return false
}

func TestNoCredentialsAreRefused(t *testing.T) {
	b := newSecureBroker(t)
	anon := newTransport(t, b.config()) // TLS, but no certificate and no token
	_, err := start(t, anon, options.AgentSubscriptions("cluster1", []string{dataType}))
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("Start without credentials: %v, want Unauthenticated", err)
	}
	anon = newTransport(t, b.config())
	mustStart(t, anon, nil)
	err = send(anon, options.Route{Role: options.RoleSpec, Source: "A", Cluster: "cluster1"}, event("x", "spec.create_request", nil))
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("Send without credentials: %v, want Unauthenticated", err)
	}
	forged := b.source(t, "forged-token")
	_, err = start(t, forged, options.SourceSubscriptions("A", []string{dataType}))
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("Start with an unknown token: %v, want Unauthenticated", err)
	}
	// A certificate from another CA fails the TLS handshake: Start keeps
	// trying until its context ends.
	other := testcerts.NewCA(t).Client(t, "agent-cluster1")
	cfg := b.config()
	cfg.TLS.CertFile, cfg.TLS.KeyFile = other.CertFile, other.KeyFile
	cfg.DialTimeout = options.Duration(300 * time.Millisecond)
	rogue := newTransport(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := rogue.Start(ctx, options.AgentSubscriptions("cluster1", nil), transporttest.NewRecorder()); err == nil {
		t.Error("a certificate of another CA was accepted")
	}
}

func TestAnAgentActsOnlyForItsOwnCluster(t *testing.T) {
	b := newSecureBroker(t)
	agent1 := b.agent(t, "agent-cluster1")
	_, err := start(t, agent1, options.AgentSubscriptions("cluster2", []string{dataType}))
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("cluster1's agent subscribing to cluster2: %v, want PermissionDenied", err)
	}
	agent1 = b.agent(t, "agent-cluster1")
	mustStart(t, agent1, options.AgentSubscriptions("cluster1", []string{dataType}))

	status2 := event("s2", "status.update_request", map[string]string{types.ExtClusterName: "cluster2", types.ExtOriginalSource: "A"})
	err = send(agent1, options.Route{Role: options.RoleStatus, Source: "A", Cluster: "cluster2"}, status2)
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("cluster1's agent publishing cluster2's status: %v, want PermissionDenied", err)
	}
	// The broker routes by the event's attributes: one that names another
	// cluster than the route asked for never leaves the client.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	status2 = event("s2", "status.update_request", map[string]string{types.ExtClusterName: "cluster2", types.ExtOriginalSource: "A"})
	err = agent1.Send(ctx, options.Route{Role: options.RoleStatus, Source: "A", Cluster: "cluster1"}, status2)
	if !errors.Is(err, options.ErrInvalidEvent) {
		t.Errorf("cluster1's agent sending, on its own route, a status that names cluster2: %v, want ErrInvalidEvent", err)
	}
	err = send(agent1, options.Route{Role: options.RoleSpec, Source: "A", Cluster: "cluster1"}, event("spec", "spec.create_request", nil))
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("an agent publishing a spec as source A: %v, want PermissionDenied", err)
	}
	own := event("s1", "status.update_request", map[string]string{types.ExtClusterName: "cluster1", types.ExtOriginalSource: "A"})
	if err := send(agent1, options.Route{Role: options.RoleStatus, Source: "A", Cluster: "cluster1"}, own); err != nil {
		t.Errorf("cluster1's agent publishing its own status: %v", err)
	}
	// Group membership counts: the certificate's organization is its group.
	// testcerts signs no organizations, so cluster2's agent is refused here.
	agent2 := b.agent(t, "agent-cluster2")
	if _, err := start(t, agent2, options.AgentSubscriptions("cluster2", nil)); status.Code(err) != codes.PermissionDenied {
		t.Errorf("an identity with no grant: %v, want PermissionDenied", err)
	}
}

func TestASourceNeverReceivesAnotherSourcesStatus(t *testing.T) {
	b := newSecureBroker(t)
	a := b.source(t, "token-a")
	_, err := start(t, a, options.SourceSubscriptions("B", []string{dataType}))
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("source A subscribing as B: %v, want PermissionDenied", err)
	}
	a = b.source(t, "token-a")
	recvA := mustStart(t, a, options.SourceSubscriptions("A", []string{dataType}))
	recvB := mustStart(t, b.sourceInline(t, "token-b"), options.SourceSubscriptions("B", []string{dataType}))
	agent := b.agent(t, "agent-cluster1")
	mustStart(t, agent, options.AgentSubscriptions("cluster1", []string{dataType}))

	forB := event("for-b", "status.update_request", map[string]string{types.ExtClusterName: "cluster1", types.ExtOriginalSource: "B"})
	if err := send(agent, options.Route{Role: options.RoleStatus, Source: "B", Cluster: "cluster1"}, forB); err != nil {
		t.Fatal(err)
	}
	forA := event("for-a", "status.update_request", map[string]string{types.ExtClusterName: "cluster1", types.ExtOriginalSource: "A"})
	if err := send(agent, options.Route{Role: options.RoleStatus, Source: "A", Cluster: "cluster1"}, forA); err != nil {
		t.Fatal(err)
	}
	recvB.Wait(t, "B's status at B", 10*time.Second, func() bool { return find(recvB, "for-b") })
	// Per-publisher order: once A has the later event, the earlier one
	// would have reached it too.
	recvA.Wait(t, "A's status at A", 10*time.Second, func() bool { return find(recvA, "for-a") })
	if find(recvA, "for-b") {
		t.Error("source A received source B's status")
	}
	if find(recvB, "for-a") {
		t.Error("source B received source A's status")
	}
}

// A rotated token file takes effect without a restart: once the old token
// is invalid on the server, calls succeed only with the new one. The
// server's authentication cache is off, so a success cannot be an old
// answer remembered.
func TestTokenFileRotation(t *testing.T) {
	var mu sync.Mutex
	valid := map[string]bool{"old": true}
	var seen []string // tokens of the calls the server authenticated
	auth := authFunc(func(_ context.Context, c server.Credentials) (server.Identity, error) {
		mu.Lock()
		defer mu.Unlock()
		if !valid[c.Token] {
			return server.Identity{}, errors.New("expired token")
		}
		seen = append(seen, c.Token)
		return server.Identity{User: "source-a"}, nil
	})
	lastSeen := func() string {
		mu.Lock()
		defer mu.Unlock()
		if len(seen) == 0 {
			return ""
		}
		return seen[len(seen)-1]
	}
	b := newSecureBrokerWithConfig(t, server.Config{AuthCacheTTL: options.Duration(-1)}, server.WithAuthenticator(auth))
	tr := b.source(t, "old")
	mustStart(t, tr, nil)
	route := options.Route{Role: options.RoleStatusResync, Source: "A"}
	if err := send(tr, route, event("1", "status.resync_request", nil)); err != nil {
		t.Fatal(err)
	}
	if got := lastSeen(); got != "old" {
		t.Fatalf("the server authenticated %q before rotation, want old", got)
	}
	mu.Lock()
	valid = map[string]bool{"new": true} // the old token expires; the new one is issued
	mu.Unlock()
	if err := send(tr, route, event("2", "status.resync_request", nil)); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("Send with the expired token: %v, want Unauthenticated (is the server caching?)", err)
	}
	if err := os.WriteFile(filepath.Join(b.dir, "old"), []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := send(tr, route, event("3", "status.resync_request", nil))
		if err == nil {
			break
		}
		if status.Code(err) != codes.Unauthenticated || time.Now().After(deadline) {
			t.Fatalf("Send after rotation: %v", err)
		}
		time.Sleep(100 * time.Millisecond) // poll: the file is checked once a second
	}
	if got := lastSeen(); got != "new" {
		t.Errorf("the server authenticated %q after rotation, want new", got)
	}
}

type authFunc func(context.Context, server.Credentials) (server.Identity, error)

func (f authFunc) Authenticate(ctx context.Context, c server.Credentials) (server.Identity, error) {
	return f(ctx, c)
}

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// Rotated certificates, keys and CA bundles take effect on both sides
// without a restart of either: after every file moved to another CA, the
// agent reconnects to the same server, each verifying the other against the
// new CA.
func TestRotatedCAsTakeEffectWithoutARestart(t *testing.T) {
	before, after := testcerts.NewCA(t), testcerts.NewCA(t)
	dir := t.TempDir()
	file := func(name string) string { return filepath.Join(dir, name) }
	install := func(ca *testcerts.CA) {
		t.Helper()
		server, client := ca.Server(t, "broker"), ca.Client(t, "agent-cluster1")
		for name, data := range map[string][]byte{
			"server.crt": server.CertPEM, "server.key": server.KeyPEM, "server-ca.pem": ca.CertPEM,
			"client.crt": client.CertPEM, "client.key": client.KeyPEM, "client-ca.pem": ca.CertPEM,
		} {
			// As a Secret volume rotates: a new file renamed into place.
			if err := os.WriteFile(file(name+".new"), data, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(file(name+".new"), file(name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	install(before)
	srv := grpctest.NewServerWithConfig(t, server.Config{TLS: server.TLSConfig{
		CertFile: file("server.crt"), KeyFile: file("server.key"), ClientCAFile: file("server-ca.pem"), RequireClientCert: true,
	}},
		server.WithAuthenticator(server.CertificateAuthenticator{}),
		server.WithAuthorizer(server.StaticAuthorizer{Clusters: map[string][]string{"agent-cluster1": {"cluster1"}}}))
	cfg := srv.Config()
	cfg.TLS = options.TLSConfig{CAFile: file("client-ca.pem"), CertFile: file("client.crt"), KeyFile: file("client.key")}
	agent := newTransport(t, cfg)
	recv, err := start(t, agent, options.AgentSubscriptions("cluster1", []string{dataType}))
	if err != nil {
		t.Fatal(err)
	}

	install(after)
	connects := recv.Connects()
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	recv.Wait(t, "the agent to reconnect with the rotated files", 20*time.Second, func() bool { return recv.Connects() > connects })
}

// A certificate that expired is refused at the handshake, and a connection
// ends when the certificate it was opened with expires: the agent
// reconnects only once it holds a valid one (here, its rotated files).
func TestAConnectionEndsWhenItsCertificateExpires(t *testing.T) {
	reg := prometheus.NewRegistry()
	b := newSecureBroker(t, server.WithRegisterer(reg))
	subs := options.AgentSubscriptions("cluster1", []string{dataType})

	// An expired certificate, and one of another CA: refused and counted.
	for reason, pair := range map[string]testcerts.Pair{
		"expired":           b.ca.ClientUntil(t, "agent-cluster1", time.Now().Add(-time.Minute)),
		"unknown_authority": testcerts.NewCA(t).Client(t, "agent-cluster1"),
	} {
		cfg := b.config()
		cfg.TLS.CertFile, cfg.TLS.KeyFile = pair.CertFile, pair.KeyFile
		cfg.DialTimeout = options.Duration(300 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		if err := newTransport(t, cfg).Start(ctx, subs, transporttest.NewRecorder()); err == nil {
			t.Errorf("%s: the certificate was accepted", reason)
		}
		cancel()
		// Under TLS 1.3 the client can see the refusal before the server's
		// handshake returns and counts it.
		want := `grpc_server_tls_handshake_failures_total{reason="` + reason + `"}`
		waitUntil(t, "the refusal counted: "+want, func() bool { return strings.Contains(scrape(t, reg), want) })
	}

	dir := t.TempDir()
	install := func(p testcerts.Pair) {
		t.Helper()
		for path, data := range map[string][]byte{"tls.crt": p.CertPEM, "tls.key": p.KeyPEM} {
			if err := os.WriteFile(filepath.Join(dir, path+".tmp"), data, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(filepath.Join(dir, path+".tmp"), filepath.Join(dir, path)); err != nil {
				t.Fatal(err)
			}
		}
	}
	install(b.ca.ClientUntil(t, "agent-cluster1", time.Now().Add(5*time.Second)))
	cfg := b.config()
	cfg.TLS.CertFile, cfg.TLS.KeyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	r := mustStart(t, newTransport(t, cfg), subs)
	streams := b.srv.Server().Subscribers()
	if streams == 0 {
		t.Fatal("no stream open")
	}
	waitUntil(t, "the streams end with the certificate", func() bool { return b.srv.Server().Subscribers() == 0 })

	install(b.ca.Client(t, "agent-cluster1"))
	waitUntil(t, "the agent back with its rotated certificate", func() bool {
		return r.Connects() >= 2 && b.srv.Server().Subscribers() == streams
	})
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
