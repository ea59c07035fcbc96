// Package isolation proves, against a real Mosquitto, the broker setup of
// docs/mosquitto.md, rendered by internal/testsupport/mosquitto for both topic layouts:
// mutual TLS with the certificate's common name as the MQTT username, and
// an ACL that confines every agent to its cluster's topics and every source
// to its own.
package isolation

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	mqttpaho "github.com/cloudevents/sdk-go/protocol/mqtt_paho/v2"
	"github.com/cloudevents/sdk-go/v2/binding"
	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"
	"github.com/go-logr/logr"
	"go.uber.org/goleak"

	"github.com/workwire/sdk-go/internal/testsupport/mosquitto"
	"github.com/workwire/sdk-go/internal/testsupport/testcerts"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/options/transporttest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type broker struct {
	addr   string
	ca     *testcerts.CA
	layout string
	topics *options.Topics
}

// startBroker runs the recipe of docs/mosquitto.md for layout, with the
// sources hub1 and hub2.
func startBroker(t *testing.T, layoutName string) broker {
	return startBrokerWith(t, layoutName, func(acl string) string { return acl })
}

// startBrokerWith is startBroker with the recipe's ACL as edit makes it.
func startBrokerWith(t *testing.T, layoutName string, edit func(acl string) string) broker {
	layout, err := options.LayoutByName(layoutName)
	if err != nil {
		t.Fatal(err)
	}
	topics, err := layout.Compile()
	if err != nil {
		t.Fatal(err)
	}
	acl, err := mosquitto.ACL(layout, "hub1", "hub2")
	if err != nil {
		t.Fatal(err)
	}
	ca := testcerts.NewCA(t)
	server := ca.Server(t, "mosquitto")
	aclFile := filepath.Join(t.TempDir(), "workwire.acl")
	if err := os.WriteFile(aclFile, []byte(edit(acl)), 0o644); err != nil {
		t.Fatal(err)
	}
	b := mosquitto.Start(t, func(port int) string {
		return mosquitto.Recipe{Port: port, Bind: "127.0.0.1", CAFile: ca.CAFile(), CertFile: server.CertFile,
			KeyFile: server.KeyFile, ACLFile: aclFile}.Config()
	})
	return broker{addr: b.Addr(), ca: ca, layout: layoutName, topics: topics}
}

// as returns a transport that connects with the certificate of identity.
func (b broker) as(t *testing.T, identity string) *mqtt.Transport {
	cert := b.ca.Client(t, identity)
	tr, err := mqtt.New(mqtt.Config{
		BrokerHost: b.addr,
		Layout:     b.layout,
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

// raw returns a bare MQTT v5 client connected with the certificate of
// identity, to read what the broker answers a PUBLISH.
func (b broker) raw(t *testing.T, identity string) *paho.Client {
	cert := b.ca.Client(t, identity)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d := tls.Dialer{Config: &tls.Config{RootCAs: b.ca.Pool(), Certificates: []tls.Certificate{cert.TLSCertificate(t)}, ServerName: "localhost"}}
	conn, err := d.DialContext(ctx, "tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	cli := paho.NewClient(paho.ClientConfig{Conn: conn})
	if _, err := cli.Connect(ctx, &paho.Connect{ClientID: "raw-" + identity, CleanStart: true, KeepAlive: 30}); err != nil {
		_ = conn.Close()
		t.Fatalf("raw connect as %s: %v", identity, err)
	}
	t.Cleanup(func() {
		_ = cli.Disconnect(&paho.Disconnect{})
		<-cli.Done()
	})
	return cli
}

// rawSend publishes evt at QoS 1 on route's topic, as the transport would
// encode it, and returns the reason code of the broker's PUBACK.
func (b broker) rawSend(t *testing.T, cli *paho.Client, route options.Route, evt *cloudevents.Event) byte {
	t.Helper()
	topic, err := b.topics.Topic(route)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pub := &paho.Publish{Topic: topic, QoS: 1}
	if err := mqttpaho.WritePubMessage(ctx, binding.ToMessage(evt), pub); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Publish(ctx, pub)
	if resp == nil {
		t.Fatalf("raw publish to %s: no PUBACK: %v", topic, err)
	}
	return resp.ReasonCode
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

func TestMosquittoIsolatesClustersAndSources(t *testing.T) {
	for _, layout := range []string{"workwire", "ocm"} {
		t.Run(layout, func(t *testing.T) { isolation(t, layout) })
	}
}

func isolation(t *testing.T, layout string) {
	b := startBroker(t, layout)
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
		if err := send(s.tr, s.route, s.id, eventType(s.route)); err != nil {
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

	// Nobody publishes as someone else: the broker answers the PUBLISH
	// with 0x87 Not authorized, Send says so (at once, not by timing
	// out), and the victim, subscribed where the forged event would go,
	// never gets it. The marker, sent after the forged event on the same
	// connection to a topic the victim reads, proves the forged one would
	// have arrived by then: Mosquitto keeps one client's messages to one
	// subscriber in order.
	raws := map[string]*paho.Client{"cluster1": b.raw(t, "cluster1"), "hub2": b.raw(t, "hub2")}
	for i, f := range []struct {
		name     string
		identity string
		tr       *mqtt.Transport
		forged   options.Route
		marker   options.Route
		victim   *transporttest.Recorder
	}{
		{"cluster1 sends cluster2's status", "cluster1", agent1,
			options.Route{Role: options.RoleStatus, Source: "hub1", Cluster: "cluster2"}, status, hub1Recv},
		{"cluster1 sends cluster2's spec resync", "cluster1", agent1,
			options.Route{Role: options.RoleSpecResync, Cluster: "cluster2"}, options.Route{Role: options.RoleSpecResync, Cluster: "cluster1"}, hub1Recv},
		{"hub2 sends hub1's spec", "hub2", hub2,
			spec, options.Route{Role: options.RoleSpec, Source: "hub2", Cluster: "cluster1"}, agent1Recv},
		{"hub2 sends hub1's status resync", "hub2", hub2,
			options.Route{Role: options.RoleStatusResync, Source: "hub1"}, options.Route{Role: options.RoleStatusResync, Source: "hub2"}, agent1Recv},
	} {
		forgedID, markerID := fmt.Sprintf("forged-%d", i), fmt.Sprintf("after-forged-%d", i)
		rawForgedID, rawMarkerID := "raw-"+forgedID, "raw-"+markerID

		begin := time.Now()
		err := send(f.tr, f.forged, forgedID, eventType(f.forged))
		switch {
		case err == nil:
			t.Errorf("%s: Send succeeded", f.name)
		case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, options.ErrNotConnected) || time.Since(begin) > 4*time.Second:
			t.Errorf("%s: Send failed, but not by the broker's refusal: %v", f.name, err)
		case !strings.Contains(strings.ToLower(err.Error()), "not authorized"):
			t.Errorf("%s: Send: %v, want the broker's not-authorized answer", f.name, err)
		}
		if code := b.rawSend(t, raws[f.identity], f.forged, transporttest.NewEvent(rawForgedID, eventType(f.forged))); code != packets.PubackNotAuthorized {
			t.Errorf("%s: PUBACK reason code 0x%02x, want 0x87 (not authorized)", f.name, code)
		}

		if err := send(f.tr, f.marker, markerID, eventType(f.marker)); err != nil {
			t.Fatalf("%s: marker: %v", f.name, err)
		}
		if code := b.rawSend(t, raws[f.identity], f.marker, transporttest.NewEvent(rawMarkerID, eventType(f.marker))); code >= 0x80 {
			t.Fatalf("%s: raw marker refused: 0x%02x", f.name, code)
		}
		f.victim.Wait(t, f.name+": the markers at the victim", 10*time.Second, func() bool {
			return has(f.victim, markerID) && has(f.victim, rawMarkerID)
		})
		if has(f.victim, forgedID) || has(f.victim, rawForgedID) {
			t.Errorf("%s: the victim received the forged event", f.name)
		}
	}
	for _, r := range []*transporttest.Recorder{hub1Recv, hub2Recv, agent1Recv, agent2Recv, spyRecv, thiefRecv} {
		for _, d := range r.Deliveries() {
			if strings.Contains(d.Event.ID(), "forged-") && !strings.Contains(d.Event.ID(), "after-forged-") {
				t.Errorf("forged event %s was delivered", d.Event.ID())
			}
		}
	}

	// Without a client certificate nobody connects. The broker, its address
	// and the CA are those every client above connected with; only the
	// certificate is missing. (Mosquitto resets the connection after the
	// TLS 1.3 handshake, so the error need not name the certificate.)
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

// The recipe's ACL lets each client probe its own subscription (a source's
// statuses, an agent's specs): the probe comes back to it, and to no other
// source. Without the probe lines, the broker refuses the probe, and Probe
// says the subscription cannot be probed.
func TestTheRecipesProbesComeBack(t *testing.T) {
	for _, layout := range []string{"workwire", "ocm"} {
		t.Run(layout, func(t *testing.T) {
			b := startBroker(t, layout)
			hub1, hub2, agent1 := b.as(t, "hub1"), b.as(t, "hub2"), b.as(t, "cluster1")
			hub1Recv := mustStart(t, hub1, options.SourceSubscriptions("hub1", nil))
			hub2Recv := mustStart(t, hub2, options.SourceSubscriptions("hub2", nil))
			agent1Recv := mustStart(t, agent1, options.AgentSubscriptions("cluster1", nil))
			for _, p := range []struct {
				tr  *mqtt.Transport
				sub options.Subscription
				rec *transporttest.Recorder
			}{
				{hub1, options.SourceSubscriptions("hub1", nil)[0], hub1Recv},
				{agent1, options.AgentSubscriptions("cluster1", nil)[0], agent1Recv},
			} {
				probe := options.NewProbe("test")
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := p.tr.Probe(ctx, p.sub, probe)
				cancel()
				if err != nil {
					t.Fatalf("probe of %s: %v", p.sub.Role, err)
				}
				p.rec.Wait(t, "the probe of "+p.sub.Role.String(), 10*time.Second, func() bool { return has(p.rec, probe.ID()) })
				if has(hub2Recv, probe.ID()) {
					t.Errorf("hub2 received the probe of %s", p.sub.Role)
				}
			}

			refusing := startBrokerWith(t, layout, func(acl string) string {
				var kept []string
				for _, line := range strings.Split(acl, "\n") {
					if !strings.Contains(line, options.ProbePeer) {
						kept = append(kept, line)
					}
				}
				return strings.Join(kept, "\n")
			})
			hub := refusing.as(t, "hub1")
			mustStart(t, hub, options.SourceSubscriptions("hub1", nil))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := hub.Probe(ctx, options.SourceSubscriptions("hub1", nil)[0], options.NewProbe("test")); !errors.Is(err, options.ErrProbeUnsupported) {
				t.Errorf("probe refused by the ACL: %v, want ErrProbeUnsupported", err)
			}
		})
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
