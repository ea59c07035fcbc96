package pubsub_test

import (
	"context"
	"testing"
	"time"

	gpubsub "cloud.google.com/go/pubsub/v2"
	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/pubsub"
	"github.com/workwire/sdk-go/options/pubsub/pubsubtest"
	"github.com/workwire/sdk-go/options/transporttest"
)

// OpenCensus, which the Pub/Sub client links, starts a process-wide
// worker. The client's stream keep-alive goroutine (pubsub v2.9.0's
// messageIterator.streamKeepAliveHandler) notices that its stream ended
// only at its next tick, up to 10 s after Close returns.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"),
		goleak.IgnoreTopFunction("cloud.google.com/go/pubsub/v2.(*messageIterator).streamKeepAliveHandler"))
}

func newTransport(t testing.TB, cfg pubsub.Config) *pubsub.Transport {
	t.Helper()
	tr, err := pubsub.New(cfg, pubsub.WithLogger(logr.Discard()))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// fast is cfg with reconnects paced for tests.
func fast(cfg pubsub.Config) pubsub.Config {
	cfg.ReconnectMinBackoff = options.Duration(20 * time.Millisecond)
	cfg.ReconnectMaxBackoff = options.Duration(500 * time.Millisecond)
	return cfg
}

func TestConformance(t *testing.T) {
	s := pubsubtest.NewServer(t)
	cfg := fast(s.Config())
	transporttest.Run(t, transporttest.Harness{
		New: func(t *testing.T) options.Transport { return newTransport(t, cfg) },
		NewUnreachable: func(t *testing.T) options.Transport {
			c := cfg
			c.Endpoint = transporttest.ClosedAddr(t)
			return newTransport(t, c)
		},
		NewLimited: func(t *testing.T, limit int) options.Transport {
			c := cfg
			c.MaxEventBytes = limit
			return newTransport(t, c)
		},
		Restart: func(*testing.T) { s.DropConnections() },
		SendRaw: func(t *testing.T, r options.Route, payload []byte) { publishRaw(t, s, r, payload) },
	})
}

// publishRaw publishes bytes that are not a CloudEvent where route's
// subscribers read them.
func publishRaw(t *testing.T, s *pubsubtest.Server, r options.Route, payload []byte) {
	t.Helper()
	conn, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client, err := gpubsub.NewClient(ctx, pubsubtest.ProjectID, option.WithGRPCConn(conn))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if r.Role != options.RoleSpec {
		t.Fatalf("publishRaw: role %s", r.Role)
	}
	p := client.Publisher(pubsub.SourceEventsTopic)
	defer p.Stop()
	if _, err := p.Publish(ctx, &gpubsub.Message{Data: payload, Attributes: map[string]string{"ce-clustername": r.Cluster}}).Get(ctx); err != nil {
		t.Fatal(err)
	}
}
