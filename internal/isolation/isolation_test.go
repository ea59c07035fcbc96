// Package isolation proves, against a real Mosquitto, the broker setup of
// docs/mosquitto.md: mutual TLS with the certificate's common name as the
// MQTT username, and an ACL that confines every agent to its cluster's
// topics and every source to its own.
package isolation

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"

	"github.com/workwire/sdk-go/internal/mosquitto"
	"github.com/workwire/sdk-go/internal/testcerts"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/options/transporttest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The ACL of docs/mosquitto.md, for sources hub1 and hub2 (seed layout).
const acl = `
# Agents: the username is the cluster name (the certificate's CN).
pattern read  sources/+/clusters/%u/spec
pattern write sources/+/clusters/%u/status
pattern write sources/clusters/%u/specresync
pattern read  sources/+/clusters/statusresync

# Sources: one block each.
user hub1
topic write sources/hub1/clusters/+/spec
topic read  sources/hub1/clusters/+/status
topic read  sources/clusters/+/specresync
topic write sources/hub1/clusters/statusresync

user hub2
topic write sources/hub2/clusters/+/spec
topic read  sources/hub2/clusters/+/status
topic read  sources/clusters/+/specresync
topic write sources/hub2/clusters/statusresync
`

type broker struct {
	addr string
	ca   *testcerts.CA
}

func startBroker(t *testing.T) broker {
	ca := testcerts.NewCA(t)
	server := ca.Server(t, "mosquitto")
	dir := t.TempDir()
	aclFile := filepath.Join(dir, "acl")
	if err := os.WriteFile(aclFile, []byte(acl), 0o644); err != nil {
		t.Fatal(err)
	}
	listener := "cafile " + ca.CAFile() + "\ncertfile " + server.CertFile + "\nkeyfile " + server.KeyFile +
		"\nrequire_certificate true\nuse_identity_as_username true\ntls_version tlsv1.2"
	global := "allow_anonymous false\nacl_file " + aclFile
	b := mosquitto.Start(t, listener, global)
	return broker{addr: b.Addr(), ca: ca}
}

// as returns a transport that connects with the certificate of identity.
func (b broker) as(t *testing.T, identity string) *mqtt.Transport {
	cert := b.ca.Client(t, identity)
	tr, err := mqtt.New(mqtt.Config{
		BrokerHost: b.addr,
		TLS:        options.TLSConfig{CAFile: b.ca.CAFile(), CertFile: cert.CertFile, KeyFile: cert.KeyFile},
	}, mqtt.WithLogger(logr.Discard()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = tr.Close(ctx)
	})
	return tr
}

func start(t *testing.T, tr *mqtt.Transport, subs []options.Subscription) (*transporttest.Recorder, error) {
	r := transporttest.NewRecorder()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return r, tr.Start(ctx, subs, r)
}

func mustStart(t *testing.T, tr *mqtt.Transport, subs []options.Subscription) *transporttest.Recorder {
	t.Helper()
	r, err := start(t, tr, subs)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func send(tr *mqtt.Transport, route options.Route, id, typ string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return tr.Send(ctx, route, transporttest.NewEvent(id, typ))
}

func TestMosquittoIsolatesClustersAndSources(t *testing.T) {
	b := startBroker(t)
	hub1 := b.as(t, "hub1")
	hub1Recv := mustStart(t, hub1, options.SourceSubscriptions("hub1", nil))
	hub2 := b.as(t, "hub2")
	hub2Recv := mustStart(t, hub2, options.SourceSubscriptions("hub2", nil))
	agent1 := b.as(t, "cluster1")
	agent1Recv := mustStart(t, agent1, options.AgentSubscriptions("cluster1", nil))

	// What is allowed works: spec down, status up, both resyncs.
	spec := options.Route{Role: options.RoleSpec, Source: "hub1", Cluster: "cluster1"}
	status := options.Route{Role: options.RoleStatus, Source: "hub1", Cluster: "cluster1"}
	for _, s := range []struct {
		tr    *mqtt.Transport
		route options.Route
		id    string
		rec   *transporttest.Recorder
	}{
		{hub1, spec, "spec-1", agent1Recv},
		{agent1, status, "status-1", hub1Recv},
		{agent1, options.Route{Role: options.RoleSpecResync, Cluster: "cluster1"}, "specresync-1", hub1Recv},
		{hub1, options.Route{Role: options.RoleStatusResync, Source: "hub1"}, "statusresync-1", agent1Recv},
	} {
		if err := send(s.tr, s.route, s.id, "spec.update_request"); err != nil {
			t.Fatalf("allowed %s send: %v", s.route.Role, err)
		}
		s.rec.Wait(t, s.id, 10*time.Second, func() bool { return has(s.rec, s.id) })
	}

	// Mosquitto grants every SUBSCRIBE and applies the ACL when it
	// delivers: cluster1's identity subscribed to cluster2's specs gets
	// none of them, while cluster2's own agent does.
	agent2 := b.as(t, "cluster2")
	agent2Recv := mustStart(t, agent2, options.AgentSubscriptions("cluster2", nil))
	spy := b.as(t, "cluster1")
	spyRecv := mustStart(t, spy, options.AgentSubscriptions("cluster2", nil))
	if err := send(hub1, options.Route{Role: options.RoleSpec, Source: "hub1", Cluster: "cluster2"}, "spec-2", "spec.update_request"); err != nil {
		t.Fatal(err)
	}
	// A marker the spy may read, sent after: once it arrives, the spec
	// would have too.
	if err := send(hub1, options.Route{Role: options.RoleStatusResync, Source: "hub1"}, "marker", "status.resync_request"); err != nil {
		t.Fatal(err)
	}
	agent2Recv.Wait(t, "cluster2's spec at cluster2", 10*time.Second, func() bool { return has(agent2Recv, "spec-2") })
	spyRecv.Wait(t, "the marker at the spy", 10*time.Second, func() bool { return has(spyRecv, "marker") })
	if has(spyRecv, "spec-2") {
		t.Error("cluster1's identity received cluster2's spec")
	}
	// cluster1 cannot publish cluster2's status.
	if err := send(agent1, options.Route{Role: options.RoleStatus, Source: "hub1", Cluster: "cluster2"}, "forged", "status.update_request"); err == nil {
		t.Error("cluster1 published a status as cluster2")
	}
	// hub2, even subscribed to hub1's statuses, never receives them.
	thief := b.as(t, "hub2")
	thiefRecv := mustStart(t, thief, options.SourceSubscriptions("hub1", nil))
	if err := send(agent1, status, "status-2", "status.update_request"); err != nil {
		t.Fatal(err)
	}
	if err := send(agent1, options.Route{Role: options.RoleSpecResync, Cluster: "cluster1"}, "marker-2", "spec.resync_request"); err != nil {
		t.Fatal(err)
	}
	hub1Recv.Wait(t, "the second status", 10*time.Second, func() bool { return has(hub1Recv, "status-2") })
	thiefRecv.Wait(t, "the marker at hub2", 10*time.Second, func() bool { return has(thiefRecv, "marker-2") })
	if has(thiefRecv, "status-2") || has(hub2Recv, "status-1") || has(hub2Recv, "status-2") {
		t.Error("hub2 received hub1's status")
	}
	// A source cannot write another source's specs.
	if err := send(hub2, spec, "forged-spec", "spec.update_request"); err == nil {
		t.Error("hub2 published a spec as hub1")
	}
	// Without a client certificate nobody connects.
	anon, err := mqtt.New(mqtt.Config{BrokerHost: b.addr, TLS: options.TLSConfig{CAFile: b.ca.CAFile()}}, mqtt.WithLogger(logr.Discard()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := anon.Start(ctx, nil, transporttest.NewRecorder()); err == nil {
		t.Error("a client without a certificate connected")
	}
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := anon.Close(ctx); err != nil && !errors.Is(err, options.ErrClosed) {
		t.Fatal(err)
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
