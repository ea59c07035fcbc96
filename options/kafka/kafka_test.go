package kafka_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/kafka"
	"github.com/workwire/sdk-go/options/kafka/kafkatest"
	"github.com/workwire/sdk-go/options/transporttest"
)

// sarama's consumer registers a per-topic fetch meter in go-metrics'
// DefaultRegistry while it sizes each Fetch request (its first encoding pass
// hands the metrics helper a nil registry, which go-metrics takes for the
// default one), and go-metrics' first meter starts one process-wide ticker
// goroutine that nothing can stop. It is the only goroutine allowed to
// outlive the tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"))
}

// BrokersEnv names a real Kafka cluster (comma-separated host:port) to run
// the conformance suite against too.
const BrokersEnv = "WORKWIRE_KAFKA_BROKERS"

// fast makes a config for tests: short group timings and backoffs.
func fast(cfg kafka.Config) kafka.Config {
	if cfg.SessionTimeout == 0 {
		cfg.SessionTimeout = options.Duration(2 * time.Second)
	}
	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = options.Duration(100 * time.Millisecond)
	}
	if cfg.RebalanceTimeout == 0 {
		cfg.RebalanceTimeout = options.Duration(5 * time.Second)
	}
	cfg.ReconnectMinBackoff = options.Duration(20 * time.Millisecond)
	cfg.ReconnectMaxBackoff = options.Duration(500 * time.Millisecond)
	if v := os.Getenv("WORKWIRE_KAFKA_VERSION"); v != "" && cfg.Version == "" {
		cfg.Version = v
	}
	return cfg
}

func newTransport(t testing.TB, cfg kafka.Config, opts ...kafka.Option) *kafka.Transport {
	t.Helper()
	tr, err := kafka.New(fast(cfg), append([]kafka.Option{kafka.WithLogger(logr.Discard())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func harness(addrs []string, restart func(t *testing.T), sendRaw func(t *testing.T, r options.Route, payload []byte)) transporttest.Harness {
	return transporttest.Harness{
		New: func(t *testing.T) options.Transport { return newTransport(t, kafka.Config{Brokers: addrs}) },
		NewUnreachable: func(t *testing.T) options.Transport {
			return newTransport(t, kafka.Config{Brokers: []string{transporttest.ClosedAddr(t)}})
		},
		NewLimited: func(t *testing.T, limit int) options.Transport {
			return newTransport(t, kafka.Config{Brokers: addrs, MaxEventBytes: limit})
		},
		Restart: restart,
		SendRaw: sendRaw,
	}
}

func TestConformanceEmbeddedCluster(t *testing.T) {
	b := kafkatest.NewBroker(t)
	transporttest.Run(t, harness(b.Addrs(), func(t *testing.T) {
		if err := b.Restart(); err != nil {
			t.Fatal(err)
		}
	}, func(t *testing.T, r options.Route, payload []byte) { publishRaw(t, b, r, payload) }))
}

func TestConformanceRealCluster(t *testing.T) {
	addrs := os.Getenv(BrokersEnv)
	if addrs == "" {
		t.Skipf("%s is not set", BrokersEnv)
	}
	// A shared cluster cannot be restarted or fed raw records from here:
	// the suite skips those tests.
	transporttest.Run(t, harness(strings.Split(addrs, ","), nil, nil))
}

// publishRaw writes bytes that are not a CloudEvent where route's
// subscribers read.
func publishRaw(t testing.TB, b *kafkatest.Broker, r options.Route, payload []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Publish(ctx, kafka.DefaultTopics().Topic(r.Role), kafka.Key(r), payload); err != nil {
		t.Fatal(err)
	}
}
