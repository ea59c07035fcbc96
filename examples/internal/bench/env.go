package bench

import (
	"context"
	"net"
	"strings"
	"sync/atomic"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/go-logr/logr"
	grpclib "google.golang.org/grpc"
	"google.golang.org/grpc/stats"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/workwire/sdk-go/examples/internal/cmdutil"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc"
	"github.com/workwire/sdk-go/options/grpc/server"
	"github.com/workwire/sdk-go/options/kafka"
	"github.com/workwire/sdk-go/options/kafka/kafkatest"
	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/options/mqtt/mqtttest"
	"github.com/workwire/sdk-go/work"
)

// Env is the broker of a run and how clients reach it.
type Env struct {
	Transport work.TransportFunc // a fresh transport per client
	Close     func()
	// Dropped counts the messages the broker dropped for subscribers that
	// fell behind; nil where the broker does not tell.
	Dropped func() int64
	// Wire counts the bytes of the messages the clients sent and received
	// as they went on the wire (compressed, with their framing); nil where
	// the transport does not tell.
	Wire func() int64
}

// A Broker is a transport the bench can run over besides MQTT, Kafka and
// gRPC: -transport Name.
type Broker struct {
	Name string
	// Start returns the environment of a run over the broker at address,
	// or, when address is "", over an embedded broker that Env.Close stops.
	Start func(address string) (*Env, error)
}

// wireCounter counts the bytes of gRPC messages on the wire.
type wireCounter struct{ n atomic.Int64 }

func (c *wireCounter) HandleRPC(_ context.Context, s stats.RPCStats) {
	switch p := s.(type) {
	case *stats.InPayload:
		c.n.Add(int64(p.WireLength))
	case *stats.OutPayload:
		c.n.Add(int64(p.WireLength))
	}
}

func (c *wireCounter) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (c *wireCounter) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (c *wireCounter) HandleConn(context.Context, stats.ConnStats)                       {}

func newEnv(cfg config) (*Env, error) {
	switch cfg.transport {
	case "mqtt":
		addr, stop := cfg.broker, func() {}
		var dropped func() int64
		if addr == "" {
			b, err := mqtttest.Start()
			if err != nil {
				return nil, err
			}
			addr, stop, dropped = b.Addr(), func() { _ = b.Close() }, b.Dropped
		}
		mc := mqtt.Config{BrokerHost: addr, ContentMode: cfg.contentMode}
		return &Env{
			Transport: func() (options.Transport, error) { return mqtt.New(mc, mqtt.WithLogger(logr.Discard())) },
			Close:     stop,
			Dropped:   dropped,
		}, nil
	case "kafka":
		addrs, stop := strings.Split(cfg.broker, ","), func() {}
		if cfg.broker == "" {
			b, err := kafkatest.Start(kafkatest.WithPartitions(int32(cfg.kafkaPartitions)))
			if err != nil {
				return nil, err
			}
			addrs, stop = b.Addrs(), func() { _ = b.Close() }
		}
		kc := kafka.Config{Brokers: addrs}
		return &Env{
			Transport: func() (options.Transport, error) { return kafka.New(kc, kafka.WithLogger(logr.Discard())) },
			Close:     stop,
		}, nil
	case "grpc":
		addr, stop := cfg.broker, func() {}
		if addr == "" {
			srv, err := server.New(server.Config{Compression: cfg.compression}, server.WithLogger(logr.Discard()))
			if err != nil {
				return nil, err
			}
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return nil, err
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- srv.Serve(ctx, lis) }()
			addr, stop = lis.Addr().String(), func() { cancel(); <-done }
		}
		gc := grpc.Config{ServerAddress: addr, Compression: cfg.compression}
		wire := &wireCounter{}
		return &Env{
			Transport: func() (options.Transport, error) {
				return grpc.New(gc, grpc.WithLogger(logr.Discard()), grpc.WithDialOptions(grpclib.WithStatsHandler(wire)))
			},
			Close: stop,
			Wire:  wire.n.Load,
		}, nil
	}
	for _, b := range cfg.brokers {
		if b.Name == cfg.transport {
			return b.Start(cfg.broker)
		}
	}
	return nil, cmdutil.UnknownTransport(cfg.transport, "bench", transports(cfg.brokers))
}

// transports are the -transport values: MQTT, Kafka, gRPC and brokers.
func transports(brokers []Broker) []string {
	var more []string
	for _, b := range brokers {
		more = append(more, b.Name)
	}
	return cmdutil.Transports(more...)
}

var everything = labels.Everything()

type workEvent struct{ evt *cloudevents.Event }

// countingReceiver counts deliveries and nothing else.
type countingReceiver struct{ n *atomic.Int64 }

func (c countingReceiver) Deliver(d *options.Delivery) { c.n.Add(1); d.Done() }
func (c countingReceiver) Malformed(error)             {}
func (c countingReceiver) Connected()                  {}
