package mqtt_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/workwire/sdk-go/internal/testsupport/mosquitto"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/options/mqtt/mqtttest"
	"github.com/workwire/sdk-go/options/transporttest"
)

const packetLimit = 128 << 10

// sized returns a spec event for route with a payload of about n bytes.
func sized(id string, n int, route options.Route) *cloudevents.Event {
	evt := transporttest.NewEvent(id, "spec.create_request")
	_ = evt.SetData(cloudevents.ApplicationJSON, map[string]string{"pad": strings.Repeat("x", n)})
	return transporttest.OnRoute(evt, route)
}

func sendNow(tr *mqtt.Transport, route options.Route, evt *cloudevents.Event) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return tr.Send(ctx, route, evt)
}

// A broker that announces its limit (as the test broker now does, like
// cloud brokers) gets no oversize event at all: Send refuses it at once,
// and the connection stays up.
func TestAnAnnouncedPacketLimitIsKeptWithoutSending(t *testing.T) {
	t.Parallel()
	b := mqtttest.NewBroker(t, mqtttest.WithMaxPacketSize(packetLimit))
	tr := newTransport(t, mqtt.Config{BrokerHost: b.Addr()})
	recv := transporttest.Start(t, tr, nil)
	if got := tr.MaxEventBytes(); got != packetLimit {
		t.Fatalf("MaxEventBytes %d after connecting, want the announced %d", got, packetLimit)
	}
	route := options.Route{Role: options.RoleSpec, Source: "hub", Cluster: "c1"}
	if err := sendNow(tr, route, sized("big", 2*packetLimit, route)); !errors.Is(err, options.ErrTooLarge) {
		t.Errorf("an event over the announced limit: %v, want ErrTooLarge", err)
	}
	if err := sendNow(tr, route, sized("small", 1000, route)); err != nil {
		t.Errorf("the next event: %v", err)
	}
	if n := recv.Connects(); n != 1 {
		t.Errorf("%d connects, want 1: the oversize event cost the connection", n)
	}
}

// A broker that enforces a limit it does not announce drops the connection
// of a client that exceeds it. One oversize event costs two connections,
// then it is too large for good: it is not retried as if the drop were
// transient, and does not take the connection (and every publish in
// flight) down again and again. Events the broker takes go on.
func TestAnUnannouncedPacketLimitIsInferredFromTwoDrops(t *testing.T) {
	t.Parallel()
	b := mqtttest.NewBroker(t, mqtttest.WithUnannouncedMaxPacketSize(packetLimit))
	tr := newTransport(t, mqtt.Config{BrokerHost: b.Addr()})
	recv := transporttest.Start(t, tr, nil)
	route := options.Route{Role: options.RoleSpec, Source: "hub", Cluster: "c1"}
	if err := sendNow(tr, route, sized("normal", 100<<10, route)); err != nil {
		t.Fatalf("an event under the limit: %v", err)
	}
	waitConnected := func(n int) {
		recv.Wait(t, "the transport to reconnect", 20*time.Second, func() bool { return recv.Connects() >= n && tr.Healthy() == nil })
	}
	err := sendNow(tr, route, sized("big", 2*packetLimit, route))
	if !errors.Is(err, options.ErrNotConnected) {
		t.Fatalf("the first oversize send: %v, want ErrNotConnected (one drop may be the network's)", err)
	}
	waitConnected(2)
	err = sendNow(tr, route, sized("big", 2*packetLimit, route))
	if !errors.Is(err, options.ErrTooLarge) {
		t.Fatalf("the second oversize send: %v, want ErrTooLarge", err)
	}
	waitConnected(3)
	if err := sendNow(tr, route, sized("bigger", 3*packetLimit, route)); !errors.Is(err, options.ErrTooLarge) {
		t.Errorf("a larger event after the limit was inferred: %v, want ErrTooLarge", err)
	}
	if err := sendNow(tr, route, sized("normal2", 100<<10, route)); err != nil {
		t.Errorf("an event under the limit afterwards: %v", err)
	}
	if n := recv.Connects(); n != 3 {
		t.Errorf("%d connects, want 3: the inferred limit did not stop the drops", n)
	}
}

// Mosquitto's message_size_limit is a limit it does not announce: it
// answers a larger publish with reason code 0x95 (packet too large) and
// keeps the connection. Send makes that options.ErrTooLarge, which the
// clients do not send again, and names the setting; the next event goes
// on.
func TestMosquittosMessageSizeLimitIsTooLarge(t *testing.T) {
	t.Parallel()
	b := mosquitto.Start(t, func(port int) string { return mosquitto.Plain(port, "message_size_limit 65536\n") })
	tr := newTransport(t, mqtt.Config{BrokerHost: b.Addr()})
	recv := transporttest.Start(t, tr, nil)
	if got := tr.MaxEventBytes(); got != 0 {
		t.Fatalf("MaxEventBytes %d, want 0: message_size_limit is not announced", got)
	}
	route := options.Route{Role: options.RoleSpec, Source: "hub", Cluster: "c1"}
	err := sendNow(tr, route, sized("big", 100<<10, route))
	if !errors.Is(err, options.ErrTooLarge) || !strings.Contains(err.Error(), "message_size_limit") {
		t.Errorf("an event over message_size_limit: %v, want ErrTooLarge naming message_size_limit", err)
	}
	if err := sendNow(tr, route, sized("small", 1000, route)); err != nil {
		t.Errorf("the next event: %v", err)
	}
	if n := recv.Connects(); n != 1 {
		t.Errorf("%d connects, want 1: the refusal cost the connection", n)
	}
}
