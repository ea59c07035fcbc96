// Package brokers runs the quickstart and the bench over the transports
// that are Go modules of their own, NATS JetStream (options/nats) and
// Google Cloud Pub/Sub (options/pubsub), besides MQTT, Kafka and gRPC. It
// is a module of its own too, so that the main module requires neither:
//
//	go -C examples/brokers run ./quickstart -transport nats
//	go -C examples/brokers run ./bench -transport pubsub -works 10000 -clusters 100
//
// Without -broker each starts an embedded server: a NATS server with
// JetStream in the process, or the Pub/Sub client library's fake. With
// -broker, a NATS URL (nats://host:4222) or a Pub/Sub emulator's
// host:port, each run keeps to a stream, subjects and consumers (NATS) or
// a project (Pub/Sub) of its own, and a NATS run deletes its stream when
// it ends.
package brokers

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/uuid"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workwire/sdk-go/examples/internal/bench"
	"github.com/workwire/sdk-go/examples/internal/quickstart"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/nats"
	"github.com/workwire/sdk-go/options/nats/natstest"
	"github.com/workwire/sdk-go/options/pubsub"
	"github.com/workwire/sdk-go/options/pubsub/pubsubtest"
)

// Quickstart is what the quickstart runs over here besides MQTT, Kafka and
// gRPC.
func Quickstart() []quickstart.Broker {
	var brokers []quickstart.Broker
	for _, t := range transports {
		brokers = append(brokers, quickstart.Broker{Name: t.name, Connect: func(address, run string, out io.Writer) (func(logr.Logger) (options.Transport, error), func(), error) {
			c, err := t.connect(address, run)
			if err != nil {
				return nil, nil, err
			}
			if c.embedded != "" {
				fmt.Fprintln(out, c.embedded)
			}
			return c.newTransport, c.stop, nil
		}})
	}
	return brokers
}

// Bench is what the bench runs over here besides MQTT, Kafka and gRPC.
func Bench() []bench.Broker {
	var brokers []bench.Broker
	for _, t := range transports {
		brokers = append(brokers, bench.Broker{Name: t.name, Start: func(address string) (*bench.Env, error) {
			c, err := t.connect(address, runID())
			if err != nil {
				return nil, err
			}
			return &bench.Env{
				Transport: func() (options.Transport, error) { return c.newTransport(logr.Discard()) },
				Close:     c.stop,
			}, nil
		}})
	}
	return brokers
}

var transports = []struct {
	name    string
	connect func(address, run string) (connection, error)
}{{"nats", connectNATS}, {"pubsub", connectPubSub}}

// connection is how a run reaches its broker.
type connection struct {
	newTransport func(logr.Logger) (options.Transport, error)
	stop         func()
	embedded     string // where the embedded broker listens; "" with -broker
}

// connectNATS reaches the NATS server at url, in a stream of run's own
// (WORKWIRE_<RUN>, subjects workwire.<run>.…) that stop deletes, or an
// embedded server.
func connectNATS(url, run string) (connection, error) {
	if url == "" {
		s, err := natstest.Start()
		if err != nil {
			return connection{}, err
		}
		cfg := nats.Config{URL: s.URL()}
		return connection{
			newTransport: func(log logr.Logger) (options.Transport, error) { return nats.New(cfg, nats.WithLogger(log)) },
			stop:         s.Close,
			embedded:     "embedded NATS server (JetStream) on " + s.URL(),
		}, nil
	}
	cfg := nats.Config{
		URL:            url,
		Stream:         "WORKWIRE_" + strings.ToUpper(run),
		SubjectPrefix:  "workwire." + run,
		ConsumerPrefix: "workwire_" + run,
	}
	return connection{
		newTransport: func(log logr.Logger) (options.Transport, error) { return nats.New(cfg, nats.WithLogger(log)) },
		stop:         func() { deleteStream(url, cfg.Stream) },
	}, nil
}

// deleteStream deletes a run's stream, and with it its consumers; a server
// that cannot be reached keeps it until its maxAge.
func deleteStream(url, stream string) {
	nc, err := natsgo.Connect(url)
	if err != nil {
		return
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = js.DeleteStream(ctx, stream)
}

// connectPubSub reaches the Pub/Sub emulator at addr, in project
// workwire-<run>, or an embedded fake.
func connectPubSub(addr, run string) (connection, error) {
	cfg := pubsub.Config{ProjectID: "workwire-" + run, Endpoint: addr, DisableTLS: true, Provision: true}
	stop := func() {}
	embedded := ""
	if addr == "" {
		s, err := pubsubtest.Start()
		if err != nil {
			return connection{}, err
		}
		cfg, stop, embedded = s.Config(), s.Close, "embedded Pub/Sub server (pstest) on "+s.Addr()
	}
	return connection{
		newTransport: func(log logr.Logger) (options.Transport, error) { return pubsub.New(cfg, pubsub.WithLogger(log)) },
		stop:         stop,
		embedded:     embedded,
	}, nil
}

// runID tells a run's names from those of other runs on one broker.
func runID() string { return uuid.NewString()[:8] }
