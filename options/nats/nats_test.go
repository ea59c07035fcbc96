package nats_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/nats"
	"github.com/workwire/sdk-go/options/nats/natstest"
	"github.com/workwire/sdk-go/options/transporttest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// URLEnv names a running NATS server with JetStream (nats://host:port) to
// run the suite against too.
const URLEnv = "WORKWIRE_NATS_URL"

// isolated is a config of its own on a shared server: a stream and subjects
// no other test run uses, the stream deleted when t ends.
func isolated(t *testing.T, url string) nats.Config {
	t.Helper()
	name := fmt.Sprintf("T%d_%s", time.Now().UnixNano(), strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()))
	if len(name) > 60 {
		name = name[:60]
	}
	t.Cleanup(func() {
		nc, err := natsgo.Connect(url)
		if err != nil {
			return
		}
		defer nc.Close()
		if js, err := jetstream.New(nc); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = js.DeleteStream(ctx, name)
		}
	})
	return nats.Config{
		URL:                 url,
		Stream:              name,
		SubjectPrefix:       "test." + strings.ToLower(name),
		ReconnectMinBackoff: options.Duration(20 * time.Millisecond),
		ReconnectMaxBackoff: options.Duration(500 * time.Millisecond),
	}
}

func newTransport(t testing.TB, cfg nats.Config) *nats.Transport {
	t.Helper()
	tr, err := nats.New(cfg, nats.WithLogger(logr.Discard()))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func harness(t *testing.T, url string, cfg nats.Config, restart func(t *testing.T)) transporttest.Harness {
	return transporttest.Harness{
		New: func(*testing.T) options.Transport { return newTransport(t, cfg) },
		NewUnreachable: func(t *testing.T) options.Transport {
			c := cfg
			c.URL = "nats://" + transporttest.ClosedAddr(t)
			return newTransport(t, c)
		},
		NewLimited: func(_ *testing.T, limit int) options.Transport {
			c := cfg
			c.MaxEventBytes = limit
			return newTransport(t, c)
		},
		Restart: restart,
		SendRaw: func(t *testing.T, r options.Route, payload []byte) { publishRaw(t, url, cfg, r, payload) },
	}
}

func TestConformanceEmbeddedServer(t *testing.T) {
	s := natstest.NewServer(t)
	transporttest.Run(t, harness(t, s.URL(), isolated(t, s.URL()), func(t *testing.T) {
		if err := s.Restart(); err != nil {
			t.Fatal(err)
		}
	}))
}

func TestConformanceRealServer(t *testing.T) {
	url := os.Getenv(URLEnv)
	if url == "" {
		t.Skipf("%s is not set", URLEnv)
	}
	// The clients go through a proxy, whose cut stands for the server's
	// restart: a shared server is not restarted from here.
	proxy, err := transporttest.NewProxy(strings.TrimPrefix(url, "nats://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	cfg := isolated(t, url)
	cfg.URL = "nats://" + proxy.Addr()
	transporttest.Run(t, harness(t, url, cfg, func(*testing.T) { proxy.Cut() }))
}

// publishRaw publishes bytes that are not a CloudEvent on route's subject.
func publishRaw(t *testing.T, url string, cfg nats.Config, r options.Route, payload []byte) {
	t.Helper()
	nc, err := natsgo.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	topics, err := options.WorkwireLayout.Compile()
	if err != nil {
		t.Fatal(err)
	}
	topic, err := topics.Topic(r)
	if err != nil {
		t.Fatal(err)
	}
	subject := cfg.SubjectPrefix + "." + strings.ReplaceAll(topic, "/", ".")
	if err := nc.Publish(subject, payload); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}
