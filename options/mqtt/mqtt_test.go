package mqtt_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/options/mqtt/mqtttest"
	"github.com/workwire/sdk-go/options/transporttest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// BrokerEnv names a real broker (host:port) to run the suite against too.
const BrokerEnv = "WORKWIRE_MQTT_BROKER"

func newTransport(t testing.TB, cfg mqtt.Config) *mqtt.Transport {
	t.Helper()
	cfg.ReconnectMinBackoff = options.Duration(20 * time.Millisecond)
	cfg.ReconnectMaxBackoff = options.Duration(500 * time.Millisecond)
	tr, err := mqtt.New(cfg, mqtt.WithLogger(logr.Discard()))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// harness makes the suite's transports from base, a config of the broker
// under test.
func harness(base mqtt.Config, restart func(t *testing.T)) transporttest.Harness {
	with := func(change func(c *mqtt.Config)) mqtt.Config {
		c := base
		change(&c)
		return c
	}
	return transporttest.Harness{
		New: func(t *testing.T) options.Transport { return newTransport(t, base) },
		NewUnreachable: func(t *testing.T) options.Transport {
			return newTransport(t, with(func(c *mqtt.Config) { c.BrokerHost = transporttest.ClosedAddr(t) }))
		},
		NewLimited: func(t *testing.T, limit int) options.Transport {
			return newTransport(t, with(func(c *mqtt.Config) { c.MaxEventBytes = limit }))
		},
		Restart: restart,
		SendRaw: func(t *testing.T, route options.Route, payload []byte) {
			publishRaw(t, base.BrokerHost, route, payload)
		},
	}
}

func TestConformanceEmbeddedBroker(t *testing.T) {
	for _, mode := range []string{mqtt.ContentModeBinary, mqtt.ContentModeStructured} {
		t.Run(mode, func(t *testing.T) {
			b := mqtttest.NewBroker(t)
			transporttest.Run(t, harness(mqtt.Config{BrokerHost: b.Addr(), ContentMode: mode}, func(t *testing.T) {
				if err := b.Restart(); err != nil {
					t.Fatal(err)
				}
			}))
		})
	}
}

func TestConformanceRealBroker(t *testing.T) {
	addr := os.Getenv(BrokerEnv)
	if addr == "" {
		t.Skipf("%s is not set", BrokerEnv)
	}
	// A shared broker cannot be restarted from here: the suite skips that test.
	for _, mode := range []string{mqtt.ContentModeBinary, mqtt.ContentModeStructured} {
		t.Run(mode, func(t *testing.T) {
			transporttest.Run(t, harness(mqtt.Config{BrokerHost: addr, ContentMode: mode}, nil))
		})
	}
}

// publishRaw publishes bytes that are not a CloudEvent on route's topic.
func publishRaw(t *testing.T, addr string, route options.Route, payload []byte) {
	t.Helper()
	topics, err := options.WorkwireLayout.Compile()
	if err != nil {
		t.Fatal(err)
	}
	topic, err := topics.Topic(route)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := mqtttest.Publish(ctx, addr, topic, payload); err != nil {
		t.Fatal(err)
	}
}
