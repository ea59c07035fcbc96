package recipe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"

	"github.com/workwire/sdk-go/internal/testsupport/proctest"
	"github.com/workwire/sdk-go/internal/testsupport/testcerts"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/nats"
	"github.com/workwire/sdk-go/options/transporttest"
)

// BinEnv names a nats-server binary for the tests that run a real one.
// Without it they use the nats-server on the PATH (or in /usr/sbin or
// /usr/local/bin), and skip when there is none; with it, a binary that
// cannot be run fails them.
const BinEnv = "WORKWIRE_NATS_SERVER_BIN"

// wait bounds every wait of these tests. Only a failing test reaches it:
// what is allowed is waited for until it arrives, and what is denied is
// shown by the server's answer, not by the absence of one.
const wait = 30 * time.Second

// admin is the common name of the administrator's certificate.
const admin = "workwire-admin"

// testServer is a server running the recipe for the sources hub1 and hub2
// and the clusters cluster1 and cluster2.
type testServer struct {
	url string // tls://127.0.0.1:port
	ca  *testcerts.CA
}

// testConfig renders the recipe with the test's certificates, a store in a
// temporary directory, and a port of 127.0.0.1 the OS picks.
func testConfig(t *testing.T, ca *testcerts.CA) string {
	pair := ca.Server(t, "nats")
	conf, err := Recipe{
		Host: "127.0.0.1", Port: -1,
		CAFile: ca.CAFile(), CertFile: pair.CertFile, KeyFile: pair.KeyFile,
		StoreDir: filepath.Join(t.TempDir(), "jetstream"),
		Admin:    admin, Sources: []string{"hub1", "hub2"}, Clusters: []string{"cluster1", "cluster2"},
	}.Config()
	if err != nil {
		t.Fatal(err)
	}
	return conf
}

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "workwire.conf")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startEmbedded runs the recipe's configuration file in this process
// (github.com/nats-io/nats-server/v2), until t ends.
func startEmbedded(t *testing.T) testServer {
	ca := testcerts.NewCA(t)
	opts, err := server.ProcessConfigFile(writeConfig(t, testConfig(t, ca)))
	if err != nil {
		t.Fatalf("the rendered configuration: %v", err)
	}
	opts.NoSigs, opts.NoLog = true, true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	if !s.ReadyForConnections(wait) {
		t.Fatalf("the server was not ready in %v", wait)
	}
	return testServer{url: "tls://" + s.Addr().String(), ca: ca}
}

// binary returns the nats-server to run, or "" when there is none.
func binary(t *testing.T) string {
	if bin := os.Getenv(BinEnv); bin != "" {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s=%s: %v", BinEnv, bin, err)
		}
		return bin
	}
	if bin, err := exec.LookPath("nats-server"); err == nil {
		return bin
	}
	for _, bin := range []string{"/usr/sbin/nats-server", "/usr/local/bin/nats-server"} {
		if _, err := exec.LookPath(bin); err == nil {
			return bin
		}
	}
	return ""
}

// startProcess runs the recipe's configuration file in a nats-server
// process, until t ends. It adds one line: where the server writes the port
// it got, for the test to read.
func startProcess(t *testing.T) testServer {
	bin := binary(t)
	if bin == "" {
		t.Skipf("no nats-server is installed (%s names one)", BinEnv)
	}
	ca := testcerts.NewCA(t)
	portsDir := t.TempDir()
	conf := testConfig(t, ca) + fmt.Sprintf("\n# For a private test server: where it writes the port it got.\nports_file_dir: %q\n", portsDir)
	p := proctest.Start(t, "nats-server", bin, nil, "-c", writeConfig(t, conf))
	deadline := time.Now().Add(wait)
	for {
		if addr := readPorts(t, portsDir); addr != "" {
			return testServer{url: "tls://" + addr, ca: ca}
		}
		if err := p.Exited(); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("nats-server wrote no ports file in %v:\n%s", wait, p.Tail(30))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// readPorts returns the client address in the ports file of dir, or ""
// while there is none.
func readPorts(t *testing.T, dir string) string {
	files, _ := filepath.Glob(filepath.Join(dir, "*.ports"))
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var ports struct{ Nats []string }
		if json.Unmarshal(raw, &ports) != nil || len(ports.Nats) == 0 {
			continue // not written in full yet
		}
		u, err := url.Parse(ports.Nats[0])
		if err != nil {
			t.Fatalf("ports file %s: %v", f, err)
		}
		return u.Host
	}
	return ""
}

// transport returns a workwire transport with the certificate of identity.
func (s testServer) transport(t *testing.T, identity string) *nats.Transport {
	cert := s.ca.Client(t, identity)
	tr, err := nats.New(nats.Config{
		URL:                 s.url,
		TLS:                 options.TLSConfig{CAFile: s.ca.CAFile(), CertFile: cert.CertFile, KeyFile: cert.KeyFile},
		ReconnectMinBackoff: options.Duration(20 * time.Millisecond),
		ReconnectMaxBackoff: options.Duration(500 * time.Millisecond),
	}, nats.WithLogger(logr.Discard()))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// rawClient is a bare connection with the certificate of an identity.
type rawClient struct {
	identity string
	nc       *natsgo.Conn
}

// connect connects with opts added to the CA that verifies the server.
func (s testServer) connect(opts ...natsgo.Option) (*natsgo.Conn, error) {
	return natsgo.Connect(s.url, append([]natsgo.Option{natsgo.RootCAs(s.ca.CAFile()), natsgo.MaxReconnects(0)}, opts...)...)
}

func (s testServer) raw(t *testing.T, identity string) *rawClient {
	t.Helper()
	cert := s.ca.Client(t, identity)
	// The server's permission violations do not close the connection;
	// nats.go keeps the last as LastError and hands it to the error
	// handler, here one that drops it (nats.go's own prints it).
	nc, err := s.connect(natsgo.ClientCert(cert.CertFile, cert.KeyFile),
		natsgo.ErrorHandler(func(*natsgo.Conn, *natsgo.Subscription, error) {}))
	if err != nil {
		t.Fatalf("connect as %s: %v", identity, err)
	}
	t.Cleanup(nc.Close)
	return &rawClient{identity: identity, nc: nc}
}

// request sends body, as JSON unless nil, to subject and returns the
// answer.
func (c *rawClient) request(t *testing.T, subject string, body any) []byte {
	t.Helper()
	var data []byte
	if body != nil {
		var err error
		if data, err = json.Marshal(body); err != nil {
			t.Fatal(err)
		}
	}
	msg, err := c.nc.Request(subject, data, wait)
	if err != nil {
		t.Fatalf("%s: request %s: %v", c.identity, subject, err)
	}
	return msg.Data
}

// denied checks that the server refused c's publish to, or subscription
// on, subject. The server answers either one with a "Permissions
// Violation" before it answers the PING that follows, and nats.go keeps
// that as the connection's LastError before Flush returns: no waiting for
// what does not come.
func (c *rawClient) denied(t *testing.T, what string, subscribe bool, subject string) {
	t.Helper()
	kind := "Publish"
	if subscribe {
		kind = "Subscription"
		if _, err := c.nc.SubscribeSync(subject); err != nil {
			t.Fatal(err)
		}
	} else if err := c.nc.PublishRequest(subject, c.nc.NewInbox(), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if err := c.nc.FlushTimeout(wait); err != nil {
		t.Fatalf("%s (%s): flush: %v", what, c.identity, err)
	}
	want := fmt.Sprintf("Permissions Violation for %s to %q", kind, subject)
	if err := c.nc.LastError(); !errors.Is(err, natsgo.ErrPermissionViolation) || !strings.Contains(err.Error(), want) {
		t.Errorf("%s (%s): allowed (the last error is %v), want %s", what, c.identity, err, want)
	}
}

// apiError is the error of a JetStream API answer.
type apiError struct {
	Error *struct {
		Code        int    `json:"code"`
		ErrCode     int    `json:"err_code"`
		Description string `json:"description"`
	} `json:"error"`
}

func checkAPI(t *testing.T, what string, answer []byte) {
	t.Helper()
	var a apiError
	if err := json.Unmarshal(answer, &a); err != nil {
		t.Fatalf("%s: %v: %s", what, err, answer)
	}
	if a.Error != nil {
		t.Fatalf("%s: %s", what, answer)
	}
}

// createStream creates the stream as docs/nats.md has the administrator do
// it: the rendered configuration sent to JetStream's API.
func createStream(t *testing.T, c *rawClient) {
	t.Helper()
	checkAPI(t, "create the stream", c.request(t, "$JS.API.STREAM.CREATE."+nats.DefaultStream, json.RawMessage(StreamConfig())))
}

// consumerInfo is what the administrator reads of a consumer.
type consumerInfo struct {
	apiError
	Config struct {
		FilterSubject string `json:"filter_subject"`
	} `json:"config"`
	Delivered struct {
		StreamSeq uint64 `json:"stream_seq"`
	} `json:"delivered"`
	AckFloor struct {
		StreamSeq uint64 `json:"stream_seq"`
	} `json:"ack_floor"`
	NumAckPending int `json:"num_ack_pending"`
}

func (c *rawClient) consumer(t *testing.T, name string) consumerInfo {
	t.Helper()
	var info consumerInfo
	answer := c.request(t, "$JS.API.CONSUMER.INFO."+nats.DefaultStream+"."+name, nil)
	if err := json.Unmarshal(answer, &info); err != nil || info.Error != nil {
		t.Fatalf("consumer %s: %v %s", name, err, answer)
	}
	return info
}

func send(t *testing.T, tr *nats.Transport, route options.Route, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := tr.Send(ctx, route, transporttest.NewEvent(id, eventType(route))); err != nil {
		t.Fatalf("send %s on %s: %v", id, route.Role, err)
	}
}

// eventType is a type of the conformance data type fitting route's role.
func eventType(r options.Route) string {
	switch r.Role {
	case options.RoleSpec:
		return "spec.update_request"
	case options.RoleStatus:
		return "status.update_request"
	case options.RoleSpecResync:
		return "spec.resync_request"
	default:
		return "status.resync_request"
	}
}

func has(r *transporttest.Recorder, id string) bool {
	for _, d := range r.Deliveries() {
		if d.Event.ID() == id {
			return true
		}
	}
	return false
}

func TestRecipeIsolatesClustersAndSources(t *testing.T) {
	t.Run("embedded", func(t *testing.T) {
		t.Parallel()
		isolation(t, startEmbedded(t))
	})
	t.Run("nats-server", func(t *testing.T) {
		t.Parallel()
		isolation(t, startProcess(t))
	})
}

func isolation(t *testing.T, s testServer) {
	adm := s.raw(t, admin)
	createStream(t, adm)

	hub1 := s.transport(t, "hub1")
	hub1Recv := transporttest.Start(t, hub1, options.SourceSubscriptions("hub1", nil))
	hub2 := s.transport(t, "hub2")
	hub2Recv := transporttest.Start(t, hub2, options.SourceSubscriptions("hub2", nil))
	agent1 := s.transport(t, "cluster1")
	agent1Recv := transporttest.Start(t, agent1, options.AgentSubscriptions("cluster1", nil))
	agent2 := s.transport(t, "cluster2")
	agent2Recv := transporttest.Start(t, agent2, options.AgentSubscriptions("cluster2", nil))

	// What is allowed works: a spec down, its status up, resync requests
	// both ways (to every client of the other side), each client through
	// its own consumer.
	spec1 := options.Route{Role: options.RoleSpec, Source: "hub1", Cluster: "cluster1"}
	status1 := options.Route{Role: options.RoleStatus, Source: "hub1", Cluster: "cluster1"}
	for _, step := range []struct {
		from  *nats.Transport
		route options.Route
		id    string
		to    []*transporttest.Recorder
	}{
		{hub1, spec1, "spec-1", []*transporttest.Recorder{agent1Recv}},
		{agent1, status1, "status-1", []*transporttest.Recorder{hub1Recv}},
		{hub2, options.Route{Role: options.RoleSpec, Source: "hub2", Cluster: "cluster2"}, "spec-2", []*transporttest.Recorder{agent2Recv}},
		{agent2, options.Route{Role: options.RoleStatus, Source: "hub2", Cluster: "cluster2"}, "status-2", []*transporttest.Recorder{hub2Recv}},
		{agent1, options.Route{Role: options.RoleSpecResync, Cluster: "cluster1"}, "specresync-1", []*transporttest.Recorder{hub1Recv, hub2Recv}},
		{hub1, options.Route{Role: options.RoleStatusResync, Source: "hub1"}, "statusresync-1", []*transporttest.Recorder{agent1Recv, agent2Recv}},
	} {
		send(t, step.from, step.route, step.id)
		for _, r := range step.to {
			r.Wait(t, step.id, wait, func() bool { return has(r, step.id) })
		}
	}
	// The agent's acknowledgement reached its consumer (the recorder
	// acknowledges what it receives): the server will not deliver the spec
	// again.
	for deadline := time.Now().Add(wait); ; time.Sleep(20 * time.Millisecond) {
		info := adm.consumer(t, "workwire_spec_cluster1")
		if info.Delivered.StreamSeq > 0 && info.AckFloor.StreamSeq == info.Delivered.StreamSeq && info.NumAckPending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster1's acknowledgement did not reach its consumer: %+v", info)
		}
	}

	// Everything beyond a client's share is refused, each attempt answered
	// with a permissions violation.
	c1, h1 := s.raw(t, "cluster1"), s.raw(t, "hub1")
	const pub, sub = false, true
	for _, d := range []struct {
		what      string
		c         *rawClient
		subscribe bool
		subject   string
	}{
		{"read cluster2's specs", c1, sub, "workwire.sources.*.clusters.cluster2.spec"},
		{"read everything", c1, sub, ">"},
		{"consume through cluster2's consumer", c1, pub, "$JS.API.CONSUMER.MSG.NEXT.WORKWIRE.workwire_spec_cluster2"},
		{"take over cluster2's consumer", c1, pub, "$JS.API.CONSUMER.CREATE.WORKWIRE.workwire_spec_cluster2.workwire.sources.*.clusters.cluster2.spec"},
		{"make a consumer of cluster2's specs", c1, pub, "$JS.API.CONSUMER.CREATE.WORKWIRE.spy.workwire.sources.*.clusters.cluster2.spec"},
		{"acknowledge cluster2's specs", c1, pub, "$JS.ACK.WORKWIRE.workwire_spec_cluster2.1.1.1.1.0"},
		{"read cluster2's consumer", c1, pub, "$JS.API.CONSUMER.INFO.WORKWIRE.workwire_spec_cluster2"},
		{"send a status as cluster2", c1, pub, "workwire.sources.hub1.clusters.cluster2.status"},
		{"send a spec resync as cluster2", c1, pub, "workwire.sources.clusters.cluster2.specresync"},
		{"send a spec", c1, pub, "workwire.sources.hub1.clusters.cluster1.spec"},
		{"send a status resync", c1, pub, "workwire.sources.hub1.clusters.statusresync"},
		{"delete the stream", c1, pub, "$JS.API.STREAM.DELETE.WORKWIRE"},
		{"purge the stream", c1, pub, "$JS.API.STREAM.PURGE.WORKWIRE"},
		{"change the stream", c1, pub, "$JS.API.STREAM.UPDATE.WORKWIRE"},
		{"create a stream", c1, pub, "$JS.API.STREAM.CREATE.OTHER"},
		{"delete cluster2's consumer", c1, pub, "$JS.API.CONSUMER.DELETE.WORKWIRE.workwire_spec_cluster2"},
		{"delete its own consumer", c1, pub, "$JS.API.CONSUMER.DELETE.WORKWIRE.workwire_spec_cluster1"},
		{"read a stored event", c1, pub, "$JS.API.STREAM.MSG.GET.WORKWIRE"},
		{"read the stream account's usage", c1, pub, "$JS.API.INFO"},
		{"read hub2's statuses", h1, sub, "workwire.sources.hub2.clusters.*.status"},
		{"consume through hub2's consumer", h1, pub, "$JS.API.CONSUMER.MSG.NEXT.WORKWIRE.workwire_status_hub2"},
		{"make its consumer read hub2's statuses", h1, pub, "$JS.API.CONSUMER.CREATE.WORKWIRE.workwire_status_hub1.workwire.sources.hub2.clusters.*.status"},
		{"send a spec as hub2", h1, pub, "workwire.sources.hub2.clusters.cluster1.spec"},
		{"send a status resync as hub2", h1, pub, "workwire.sources.hub2.clusters.statusresync"},
		{"send a status", h1, pub, "workwire.sources.hub1.clusters.cluster1.status"},
		{"send a spec resync", h1, pub, "workwire.sources.clusters.cluster1.specresync"},
		{"delete the stream", h1, pub, "$JS.API.STREAM.DELETE.WORKWIRE"},
		{"delete cluster1's consumer", h1, pub, "$JS.API.CONSUMER.DELETE.WORKWIRE.workwire_spec_cluster1"},
	} {
		d.c.denied(t, d.what, d.subscribe, d.subject)
	}

	// On its own consumer's subject, a client cannot point the consumer at
	// another's events: JetStream refuses a filter other than the
	// subject's.
	for _, f := range []struct {
		c                 *rawClient
		consumer, allowed string
		filter            map[string]any
	}{
		{c1, "workwire_spec_cluster1", "workwire.sources.*.clusters.cluster1.spec",
			map[string]any{"filter_subject": "workwire.sources.*.clusters.cluster2.spec"}},
		{c1, "workwire_spec_cluster1", "workwire.sources.*.clusters.cluster1.spec",
			map[string]any{"filter_subjects": []string{"workwire.sources.*.clusters.cluster2.spec"}}},
		{h1, "workwire_status_hub1", "workwire.sources.hub1.clusters.*.status",
			map[string]any{"filter_subject": "workwire.sources.hub2.clusters.*.status"}},
	} {
		config := map[string]any{"durable_name": f.consumer, "ack_policy": "explicit", "deliver_policy": "all"}
		for k, v := range f.filter {
			config[k] = v
		}
		answer := f.c.request(t, "$JS.API.CONSUMER.CREATE.WORKWIRE."+f.consumer+"."+f.allowed,
			map[string]any{"stream_name": "WORKWIRE", "config": config})
		var a apiError
		if err := json.Unmarshal(answer, &a); err != nil || a.Error == nil {
			t.Errorf("%s pointed its consumer at %v: %s", f.c.identity, f.filter, answer)
		}
		if got := adm.consumer(t, f.consumer).Config.FilterSubject; got != f.allowed {
			t.Errorf("consumer %s reads %s now, want %s", f.consumer, got, f.allowed)
		}
	}

	// The stream and the other clients' consumers are as they were.
	checkAPI(t, "the stream after the attempts", adm.request(t, "$JS.API.STREAM.INFO.WORKWIRE", nil))
	if got := adm.consumer(t, "workwire_spec_cluster2").Config.FilterSubject; got != "workwire.sources.*.clusters.cluster2.spec" {
		t.Errorf("cluster2's consumer reads %s", got)
	}

	// Each client's account is all it sees. JetStream delivers a
	// consumer's events to an inbox, and every client may subscribe to
	// _INBOX.>: cluster1's identity doing so gets none of cluster2's specs.
	// (Had the two shared an account, the server would have handed the
	// spec to the spy in the pass in which it handed it to cluster2's
	// agent, and the spy's round trip after cluster2 had it would have
	// brought it in.)
	spy := s.raw(t, "cluster1")
	inboxes, err := spy.nc.SubscribeSync("_INBOX.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := spy.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	send(t, hub1, options.Route{Role: options.RoleSpec, Source: "hub1", Cluster: "cluster2"}, "spec-3")
	agent2Recv.Wait(t, "spec-3", wait, func() bool { return has(agent2Recv, "spec-3") })
	if err := spy.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := inboxes.Pending(); n != 0 {
		msg, _ := inboxes.NextMsg(0)
		t.Errorf("cluster1's identity subscribed to _INBOX.> received %d messages, the first on %s", n, msg.Subject)
	}
	if err := spy.nc.LastError(); err != nil {
		t.Errorf("_INBOX.> was refused: %v", err)
	}

	// Only the certificates of the recipe's clients connect.
	stranger := s.ca.Client(t, "cluster3")
	if nc, err := s.connect(natsgo.ClientCert(stranger.CertFile, stranger.KeyFile)); err == nil {
		nc.Close()
		t.Error("a certificate of a cluster the recipe does not name connected")
	} else if !errors.Is(err, natsgo.ErrAuthorization) {
		t.Errorf("a certificate of a cluster the recipe does not name: %v, want an authorization violation", err)
	}
	if nc, err := s.connect(); err == nil {
		nc.Close()
		t.Error("a client without a certificate connected")
	}
}
