package transporttest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc"
	"github.com/workwire/sdk-go/options/grpc/grpctest"
	"github.com/workwire/sdk-go/options/kafka"
	"github.com/workwire/sdk-go/options/kafka/kafkatest"
	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/options/mqtt/mqtttest"
	"github.com/workwire/sdk-go/options/transporttest"
)

// deafening is a test of a deaf connection: an agent that subscribes and a
// hub that sends it specs, both through proxy.
type deafening struct {
	proxy      *transporttest.Proxy
	hub, agent options.Transport
	// eachEvent says that the proxy drops one frame, at least, for each
	// event sent while deaf: a PUBLISH packet, a DATA frame. Without it
	// (Kafka) the consumer fetches again and again what it never gets,
	// each an emptied response.
	eachEvent bool
	// reportsReconnect says that the agent's receiver hears Connected when
	// its connection is cut and made again. A Kafka consumer group that
	// keeps its partitions through a cut does not call it.
	reportsReconnect bool
}

const (
	patience = 30 * time.Second // for what must happen
	quiet    = 2 * time.Second  // for what must not
)

// poll reports whether cond holds within d, checking it every 20ms.
func poll(d time.Duration, cond func() bool) bool {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(d)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			return cond()
		}
	}
	return true
}

func delivered(r *transporttest.Recorder, id string) bool {
	for _, d := range r.Deliveries() {
		if d.Event.ID() == id {
			return true
		}
	}
	return false
}

func healthy(tr options.Transport) error {
	if hc, ok := tr.(options.HealthChecker); ok {
		return hc.Healthy()
	}
	return nil
}

func send(tr options.Transport, route options.Route, id, typ string) error {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	return tr.Send(ctx, route, transporttest.OnRoute(transporttest.NewEvent(id, typ), route))
}

// run shows that events flow through the proxy; that once it is deaf the
// agent receives nothing more of what the hub sends while its connection
// stays up and both still publish; that the proxy counts what it drops;
// and that the agent hears again once its connection is cut and made anew.
func (d deafening) run(t *testing.T) {
	source, cluster := "hub-"+t.Name(), "cluster-1"
	spec := options.Route{Role: options.RoleSpec, Source: source, Cluster: cluster}
	status := options.Route{Role: options.RoleStatus, Source: source, Cluster: cluster}
	transporttest.Start(t, d.hub, nil)
	recv := transporttest.Start(t, d.agent, options.AgentSubscriptions(cluster, nil))

	if err := send(d.hub, spec, "heard", "spec.create_request"); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if !poll(patience, func() bool { return delivered(recv, "heard") }) {
		t.Fatal("the agent did not receive a spec through the proxy")
	}

	before := d.proxy.Deafened()
	d.proxy.Deafen()
	var deaf []string
	for i := range 5 {
		id := fmt.Sprintf("deaf-%d", i)
		deaf = append(deaf, id)
		if err := send(d.hub, spec, id, "spec.update_request"); err != nil {
			t.Fatalf("Send while deaf: %v", err)
		}
	}
	afterSends := d.proxy.Deafened()
	dropped := func() bool {
		if d.eachEvent {
			return d.proxy.Deafened()-before >= len(deaf)
		}
		// Two fetches emptied after the last send: the second was asked
		// for once the first came back, so it held every event.
		return d.proxy.Deafened() >= afterSends+2
	}
	if !poll(patience, dropped) {
		t.Fatalf("the proxy dropped %d frames, want what %d events make", d.proxy.Deafened()-before, len(deaf))
	}
	// The agent's connection passes what answers its own requests.
	if err := send(d.agent, status, "status-while-deaf", "status.update_request"); err != nil {
		t.Fatalf("the agent's Send while deaf: %v", err)
	}
	var heard string
	poll(quiet, func() bool {
		for _, id := range deaf {
			if delivered(recv, id) {
				heard = "the deaf agent received " + id
				return true
			}
		}
		if err := healthy(d.agent); err != nil {
			heard = fmt.Sprintf("the deaf agent's connection went down: Healthy: %v", err)
			return true
		}
		return false
	})
	if heard != "" {
		t.Fatal(heard)
	}
	t.Logf("deafened %d frames", d.proxy.Deafened()-before)

	connects := recv.Connects()
	d.proxy.Cut()
	// The transports reconnect by themselves, the hub's sends failing
	// meanwhile: the hub sends until one arrives.
	var sent []string
	var last time.Time
	if !poll(2*patience, func() bool {
		for _, id := range sent {
			if delivered(recv, id) {
				return true
			}
		}
		if time.Since(last) > 500*time.Millisecond {
			id := fmt.Sprintf("again-%d", len(sent))
			if send(d.hub, spec, id, "spec.update_request") == nil {
				sent = append(sent, id)
			}
			last = time.Now()
		}
		return false
	}) {
		t.Fatalf("after the cut the agent received none of %d specs sent", len(sent))
	}
	if d.reportsReconnect && recv.Connects() <= connects {
		t.Errorf("the agent's receiver heard Connected %d times in all, as before the cut", recv.Connects())
	}
}

func newProxy(t *testing.T, p transporttest.Protocol, target string) *transporttest.Proxy {
	t.Helper()
	proxy, err := transporttest.NewProtocolProxy(p, target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	return proxy
}

func TestDeafMQTT(t *testing.T) {
	b := mqtttest.NewBroker(t)
	p := newProxy(t, transporttest.MQTT, b.Addr())
	transport := func() options.Transport {
		tr, err := mqtt.New(mqtt.Config{
			BrokerHost:          p.Addr(),
			ReconnectMinBackoff: options.Duration(20 * time.Millisecond),
			ReconnectMaxBackoff: options.Duration(500 * time.Millisecond),
		}, mqtt.WithLogger(logr.Discard()))
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	deafening{proxy: p, hub: transport(), agent: transport(), eachEvent: true, reportsReconnect: true}.run(t)
}

func TestDeafGRPC(t *testing.T) {
	srv := grpctest.NewServer(t)
	p := newProxy(t, transporttest.GRPC, srv.Addr())
	transport := func() options.Transport {
		cfg := srv.Config()
		cfg.ServerAddress = p.Addr()
		tr, err := grpc.New(cfg, grpc.WithLogger(logr.Discard()))
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	deafening{proxy: p, hub: transport(), agent: transport(), eachEvent: true, reportsReconnect: true}.run(t)
}

func TestDeafKafka(t *testing.T) {
	front := transporttest.NewFronted(transporttest.Kafka)
	b := kafkatest.NewBroker(t, kafkatest.WithKfakeOptions(kfake.ListenFn(front.Listen)))
	t.Cleanup(func() { _ = front.Close() })
	p := front.Proxies()[0]
	if got := strings.Join(b.Addrs(), ","); got != p.Addr() {
		t.Fatalf("the cluster advertises %s, not its proxy %s", got, p.Addr())
	}
	transport := func() options.Transport {
		tr, err := kafka.New(kafka.Config{
			Brokers:             b.Addrs(),
			SessionTimeout:      options.Duration(2 * time.Second),
			HeartbeatInterval:   options.Duration(100 * time.Millisecond),
			RebalanceTimeout:    options.Duration(5 * time.Second),
			ReconnectMinBackoff: options.Duration(20 * time.Millisecond),
			ReconnectMaxBackoff: options.Duration(500 * time.Millisecond),
		}, kafka.WithLogger(logr.Discard()))
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	deafening{proxy: p, hub: transport(), agent: transport()}.run(t)
}
