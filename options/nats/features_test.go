package nats_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workwire/sdk-go/internal/testsupport/testcerts"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/nats"
	"github.com/workwire/sdk-go/options/nats/natstest"
	"github.com/workwire/sdk-go/options/transporttest"
)

const wait = 20 * time.Second

func send(t *testing.T, tr options.Transport, r options.Route, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := tr.Send(ctx, r, transporttest.OnRoute(transporttest.NewEvent(id, "spec.create_request"), r)); err != nil {
		t.Fatalf("Send %s: %v", id, err)
	}
}

func ids(r *transporttest.Recorder) []string {
	var out []string
	for _, d := range r.Deliveries() {
		out = append(out, d.Event.ID())
	}
	return out
}

func closeNow(t *testing.T, tr options.Transport) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := tr.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// An agent that was away gets, when it starts again, the specs sent
// meanwhile: its durable consumer kept its place in the stream.
func TestAgentResumesWhereItStopped(t *testing.T) {
	s := natstest.NewServer(t)
	cfg := isolated(t, s.URL())
	hub := newTransport(t, cfg)
	transporttest.Start(t, hub, options.SourceSubscriptions("hub1", nil))
	spec := options.Route{Role: options.RoleSpec, Source: "hub1", Cluster: "cluster1"}

	agent := newTransport(t, cfg)
	rec := transporttest.Start(t, agent, options.AgentSubscriptions("cluster1", nil))
	send(t, hub, spec, "before")
	rec.Wait(t, "the first spec", wait, func() bool { return len(rec.Deliveries()) == 1 })
	closeNow(t, agent)

	send(t, hub, spec, "while-away-1")
	send(t, hub, spec, "while-away-2")
	// Restarting the server too: the stream and the consumer's place are on disk.
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}

	again := newTransport(t, cfg)
	rec = transporttest.Start(t, again, options.AgentSubscriptions("cluster1", nil))
	rec.Wait(t, "the specs sent while away", wait, func() bool { return len(rec.Deliveries()) >= 2 })
	if got := strings.Join(ids(rec), ","); got != "while-away-1,while-away-2" {
		t.Fatalf("after the restart the agent got %s, want while-away-1,while-away-2 (in order, and not the one it had)", got)
	}
}

// Replicas of one source share its statuses, as one consumer: each status
// reaches one of them. Resync requests reach every replica.
func TestSourceReplicasShareStatuses(t *testing.T) {
	s := natstest.NewServer(t)
	cfg := isolated(t, s.URL())
	replicas := []*transporttest.Recorder{
		transporttest.Start(t, newTransport(t, cfg), options.SourceSubscriptions("hub1", nil)),
		transporttest.Start(t, newTransport(t, cfg), options.SourceSubscriptions("hub1", nil)),
	}
	agent := newTransport(t, cfg)
	transporttest.Start(t, agent, options.AgentSubscriptions("cluster1", nil))

	const n = 50
	for i := range n {
		send(t, agent, options.Route{Role: options.RoleStatus, Source: "hub1", Cluster: "cluster1"}, "status-"+string(rune('a'+i%26))+string(rune('a'+i/26)))
	}
	send(t, agent, options.Route{Role: options.RoleSpecResync, Cluster: "cluster1"}, "resync")
	total := func() int { return len(replicas[0].Deliveries()) + len(replicas[1].Deliveries()) }
	replicas[0].Wait(t, "every status and the resync request", wait, func() bool { return total() == n+2 })
	for i, r := range replicas {
		resyncs := 0
		for _, d := range r.Deliveries() {
			if d.Route.Role == options.RoleSpecResync {
				resyncs++
			}
		}
		if resyncs != 1 {
			t.Errorf("replica %d got %d resync requests, want 1", i, resyncs)
		}
	}
}

// IDs NATS cannot carry in a subject token are refused, not sent.
func TestRefusesIDsSubjectsCannotCarry(t *testing.T) {
	s := natstest.NewServer(t)
	tr := newTransport(t, isolated(t, s.URL()))
	transporttest.Start(t, tr, options.SourceSubscriptions("hub1", nil))
	for _, id := range []string{"a.b", "a*", "a>", "a b"} {
		err := tr.Send(context.Background(), options.Route{Role: options.RoleSpec, Source: "hub1", Cluster: id},
			transporttest.NewEvent("e", "spec.create_request"))
		if !errors.Is(err, options.ErrInvalidRoute) {
			t.Errorf("cluster %q: %v, want ErrInvalidRoute", id, err)
		}
	}
	if err := tr.Start(context.Background(), []options.Subscription{{Role: options.RoleSpec, Cluster: "x.y"}}, transporttest.NewRecorder()); err == nil {
		t.Error("a second Start with a bad cluster succeeded")
	}
}

// Credentials: a wrong password is refused at once (no retrying what cannot
// succeed), the right one connects, and so does a token read from its file.
func TestAuthentication(t *testing.T) {
	users := natstest.NewServer(t, func(o *server.Options) { o.Username, o.Password = "agent1", "s3cret" })
	cfg := isolated(t, users.URL())
	dir := t.TempDir()
	wrong := filepath.Join(dir, "wrong")
	right := filepath.Join(dir, "right")
	writeFile(t, wrong, "nope\n")
	writeFile(t, right, "s3cret\n")

	cfg.Username, cfg.PasswordFile = "agent1", wrong
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	bad := newTransport(t, cfg)
	if err := bad.Start(ctx, options.AgentSubscriptions("cluster1", nil), transporttest.NewRecorder()); err == nil || ctx.Err() != nil {
		t.Fatalf("Start with a wrong password: %v (context: %v), want a refusal before the deadline", err, ctx.Err())
	} else if !strings.Contains(err.Error(), "uthorization") {
		t.Errorf("Start with a wrong password: %v, want it to say authorization failed", err)
	}
	closeNow(t, bad)
	cfg.PasswordFile = right
	transporttest.Start(t, newTransport(t, cfg), options.AgentSubscriptions("cluster1", nil))

	tokens := natstest.NewServer(t, func(o *server.Options) { o.Authorization = "t0ken" })
	cfg = isolated(t, tokens.URL())
	tokenFile := filepath.Join(dir, "token")
	writeFile(t, tokenFile, "t0ken\n")
	cfg.TokenFile = tokenFile
	transporttest.Start(t, newTransport(t, cfg), options.AgentSubscriptions("cluster1", nil))
}

// TLS with a client certificate: the server verifies the client, the
// client the server.
func TestMutualTLS(t *testing.T) {
	ca := testcerts.NewCA(t)
	serverPair := ca.Server(t, "127.0.0.1")
	client := ca.Client(t, "cluster1")
	tlsConf, err := server.GenTLSConfig(&server.TLSConfigOpts{
		CertFile: serverPair.CertFile, KeyFile: serverPair.KeyFile, CaFile: ca.CAFile(), Verify: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	s := natstest.NewServer(t, func(o *server.Options) { o.TLSConfig, o.TLSVerify = tlsConf, true })
	cfg := isolated(t, s.URL())
	cfg.URL = strings.Replace(s.URL(), "nats://", "tls://", 1)
	cfg.TLS = options.TLSConfig{CAFile: ca.CAFile(), CertFile: client.CertFile, KeyFile: client.KeyFile}
	rec := transporttest.Start(t, newTransport(t, cfg), options.AgentSubscriptions("cluster1", nil))
	hub := newTransport(t, cfg)
	transporttest.Start(t, hub, options.SourceSubscriptions("hub1", nil))
	send(t, hub, options.Route{Role: options.RoleSpec, Source: "hub1", Cluster: "cluster1"}, "over-tls")
	rec.Wait(t, "a spec over TLS", wait, func() bool { return len(rec.Deliveries()) == 1 })

	noCert := cfg
	noCert.TLS = options.TLSConfig{CAFile: ca.CAFile()}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	tr := newTransport(t, noCert)
	if err := tr.Start(ctx, options.AgentSubscriptions("cluster1", nil), transporttest.NewRecorder()); err == nil {
		t.Error("a client without a certificate connected to a server that verifies clients")
	}
	closeNow(t, tr)
}

// A stream made by someone else without workwire's subjects is reported
// for what it is, at once.
func TestForeignStreamIsRefused(t *testing.T) {
	s := natstest.NewServer(t)
	cfg := isolated(t, s.URL())
	nc, err := natsgo.Connect(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := nc.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.AddStream(&natsgo.StreamConfig{Name: cfg.Stream, Subjects: []string{"elsewhere.>"}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	tr := newTransport(t, cfg)
	err = tr.Start(ctx, options.AgentSubscriptions("cluster1", nil), transporttest.NewRecorder())
	if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "does not hold subject") {
		t.Fatalf("Start on a foreign stream: %v (context: %v)", err, ctx.Err())
	}
	closeNow(t, tr)
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Over a cluster, with the stream kept by three servers, a consumer whose
// leader shuts down goes on delivering from its new leader to a client
// connected to another server. (A leader killed or hung says nothing to
// the pulls it held; Config.PullHeartbeat bounds how long its clients wait
// for that. The fleet harness, whose servers are processes, kills and
// stops them.)
func TestAConsumerWhoseLeaderShutDownGoesOn(t *testing.T) {
	c := natstest.NewCluster(t, 3)
	cfg := isolated(t, c.URL())
	cfg.Replicas = 3
	hub := newTransport(t, cfg)
	transporttest.Start(t, hub, options.SourceSubscriptions("hub1", nil))
	near := cfg
	near.URL = c.Servers[0].URL()
	agent := newTransport(t, near)
	rec := transporttest.Start(t, agent, options.AgentSubscriptions("cluster1", nil))
	spec := options.Route{Role: options.RoleSpec, Source: "hub1", Cluster: "cluster1"}
	send(t, hub, spec, "before")
	rec.Wait(t, "the first spec", wait, func() bool { return len(rec.Deliveries()) == 1 })

	// The consumer led by a server the agent is not connected to, which
	// shuts down.
	leader := specConsumerLeader(t, c.URL(), cfg.Stream, "cluster1", "natstest-0")
	c.Servers[leader].Close()
	send(t, hub, spec, "after")
	rec.Wait(t, "the spec sent after the consumer's leader shut down", wait, func() bool { return len(rec.Deliveries()) == 2 })
	if got := strings.Join(ids(rec), ","); got != "before,after" {
		t.Errorf("the agent got %s, want before,after", got)
	}
}

// specConsumerLeader returns the index of the server that leads cluster's
// spec consumer, once that is not the server named not: while it is, the
// leader is asked to step down.
func specConsumerLeader(t *testing.T, url, stream, cluster, not string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	nc, js := jetStream(t, url)
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	name := ""
	for info := range s.ListConsumers(ctx).Info() {
		if strings.HasSuffix(info.Config.FilterSubject, ".clusters."+cluster+".spec") {
			name = info.Name
		}
	}
	if name == "" {
		t.Fatalf("no spec consumer of %s in stream %s", cluster, stream)
	}
	for {
		// A consumer between leaders answers nobody: each question waits
		// a second at most.
		qctx, qcancel := context.WithTimeout(ctx, time.Second)
		info, err := s.Consumer(qctx, name)
		leader := ""
		if err == nil && info.CachedInfo().Cluster != nil {
			leader = info.CachedInfo().Cluster.Leader
		}
		qcancel()
		var i int
		switch _, err := fmt.Sscanf(leader, "natstest-%d", &i); {
		case err == nil && leader != not:
			return i
		case err == nil:
			subject := fmt.Sprintf("$JS.API.CONSUMER.LEADER.STEPDOWN.%s.%s", stream, name)
			if reply, err := nc.RequestWithContext(ctx, subject, nil); err != nil || !strings.Contains(string(reply.Data), `"success":true`) {
				t.Fatalf("step down %s: %v %s", subject, err, reply.Data)
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the spec consumer is led by %q, want a server other than %s", leader, not)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// A stream the transport makes holds a consumer per agent of a fleet of
// more than a thousand clusters: nats-server 2.15 limits a stream that sets
// no limit of its own to 1,000.
func TestAStreamHoldsAConsumerPerAgentOfALargeFleet(t *testing.T) {
	s := natstest.NewServer(t)
	cfg := isolated(t, s.URL())
	transporttest.Start(t, newTransport(t, cfg), options.SourceSubscriptions("hub1", nil))

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, js := jetStream(t, s.URL())
	stream, err := js.Stream(ctx, cfg.Stream)
	if err != nil {
		t.Fatal(err)
	}
	if got := stream.CachedInfo().Config.MaxConsumers; got != nats.DefaultMaxConsumers {
		t.Errorf("the stream allows %d consumers, want %d", got, nats.DefaultMaxConsumers)
	}
	const agents = 1001
	for i := range agents {
		if _, err := stream.CreateConsumer(ctx, jetstream.ConsumerConfig{
			Durable: fmt.Sprintf("agent-%d", i), FilterSubject: fmt.Sprintf("%s.sources.*.clusters.cluster-%d.spec", cfg.SubjectPrefix, i),
			AckPolicy: jetstream.AckExplicitPolicy,
		}); err != nil {
			t.Fatalf("consumer of agent %d: %v", i, err)
		}
	}
}

// jetStream connects to url, as an administrator would, until t ends.
func jetStream(t *testing.T, url string) (*natsgo.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := natsgo.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}
