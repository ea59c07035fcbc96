// Package kafkatest runs an embedded Kafka-protocol cluster (kfake, from
// github.com/twmb/franz-go/pkg/kfake) inside the process, on 127.0.0.1 and
// ports the OS picks, in the spirit of net/http/httptest: for tests,
// examples and demos that need Kafka and must not depend on one being
// installed.
//
//	b := kafkatest.NewBroker(t)            // closed when the test ends
//	cfg := kafka.Config{Brokers: b.Addrs()}
//
// The cluster has the workwire topics (kafka.DefaultTopics) with
// WithPartitions partitions each, creates other topics on first use, and
// accepts consumer group session timeouts down to 100ms so tests can use
// short ones. Restart simulates a cluster outage on the same addresses;
// DropConnections a network failure. A Broker is goroutine-safe.
//
// Tests that check for leaked goroutines (go.uber.org/goleak) must ignore
// github.com/rcrowley/go-metrics.(*meterArbiter).tick: sarama's consumer
// starts that process-wide goroutine, which never ends, the first time it
// fetches (see the kafka package documentation).
package kafkatest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/workwire/sdk-go/options/kafka"
)

// DefaultPartitions is how many partitions each seeded topic has.
const DefaultPartitions = 4

// Option configures a Broker.
type Option func(*config)

type config struct {
	brokers    int
	partitions int32
	topics     []string
	tls        *tls.Config
	sasl       []user
	extra      []kfake.Opt
}

type user struct{ mechanism, name, password string }

// WithBrokers runs n brokers instead of one.
func WithBrokers(n int) Option { return func(c *config) { c.brokers = n } }

// WithPartitions gives each seeded topic n partitions instead of
// DefaultPartitions; topics created on first use get n too.
func WithPartitions(n int32) Option { return func(c *config) { c.partitions = n } }

// WithTopics creates topics besides kafka.DefaultTopics, for transports
// configured with other names.
func WithTopics(names ...string) Option {
	return func(c *config) { c.topics = append(c.topics, names...) }
}

// WithTLS serves Kafka over TLS with c (set ClientAuth for mutual TLS).
func WithTLS(c *tls.Config) Option { return func(cfg *config) { cfg.tls = c } }

// WithSASL turns SASL authentication on and adds a user with mechanism
// kafka.SASLPlain, kafka.SASLScramSHA256 or kafka.SASLScramSHA512. Repeat it
// for more users.
func WithSASL(mechanism, name, password string) Option {
	return func(c *config) { c.sasl = append(c.sasl, user{mechanism, name, password}) }
}

// WithKfakeOptions passes options straight to kfake.NewCluster, after the
// broker's own.
func WithKfakeOptions(opts ...kfake.Opt) Option {
	return func(c *config) { c.extra = append(c.extra, opts...) }
}

// Broker is an embedded Kafka cluster. It is goroutine-safe.
type Broker struct {
	cfg config

	mu      sync.Mutex
	cluster *kfake.Cluster // nil while stopped
	ports   []int
	conns   map[net.Conn]struct{}
}

// NewBroker starts a cluster and closes it when t ends. It fails t if the
// cluster cannot start.
func NewBroker(t testing.TB, opts ...Option) *Broker {
	t.Helper()
	b, err := Start(opts...)
	if err != nil {
		t.Fatalf("kafkatest: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// Start starts a cluster. Close it when done. It does not block beyond
// opening the listeners.
func Start(opts ...Option) (*Broker, error) {
	cfg := config{brokers: 1, partitions: DefaultPartitions}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.brokers < 1 || cfg.partitions < 1 {
		return nil, fmt.Errorf("kafkatest: %d brokers, %d partitions: want at least one of each", cfg.brokers, cfg.partitions)
	}
	b := &Broker{cfg: cfg, conns: map[net.Conn]struct{}{}}
	if err := b.serve(nil); err != nil {
		return nil, err
	}
	return b, nil
}

func (b *Broker) serve(ports []int) error {
	c := b.cfg
	opts := []kfake.Opt{
		kfake.NumBrokers(c.brokers),
		kfake.ListenFn(b.listen),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(int(c.partitions)),
		kfake.SeedTopics(c.partitions, append(kafka.DefaultTopics().Names(), c.topics...)...),
		kfake.GroupMinSessionTimeout(100 * time.Millisecond),
	}
	if len(ports) > 0 {
		opts = append(opts, kfake.Ports(ports...))
	}
	if c.tls != nil {
		opts = append(opts, kfake.TLS(c.tls))
	}
	if len(c.sasl) > 0 {
		opts = append(opts, kfake.EnableSASL())
		for _, u := range c.sasl {
			opts = append(opts, kfake.Superuser(u.mechanism, u.name, u.password))
		}
	}
	cluster, err := kfake.NewCluster(append(opts, c.extra...)...)
	if err != nil {
		return fmt.Errorf("kafkatest: start cluster: %w", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cluster, b.ports = cluster, nil
	for _, a := range cluster.ListenAddrs() {
		_, p, _ := net.SplitHostPort(a)
		n, _ := strconv.Atoi(p)
		b.ports = append(b.ports, n)
	}
	return nil
}

// listen opens a broker's listener and tracks the connections it accepts,
// for DropConnections.
func (b *Broker) listen(network, addr string) (net.Listener, error) {
	l, err := net.Listen(network, addr)
	if err != nil {
		return nil, err
	}
	return &trackingListener{Listener: l, b: b}, nil
}

type trackingListener struct {
	net.Listener
	b *Broker
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, b: l.b}
	l.b.mu.Lock()
	l.b.conns[tc] = struct{}{}
	l.b.mu.Unlock()
	return tc, nil
}

type trackedConn struct {
	net.Conn
	b    *Broker
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.b.mu.Lock()
		delete(c.b.conns, c)
		c.b.mu.Unlock()
	})
	return c.Conn.Close()
}

// Addr returns the first broker's host:port.
func (b *Broker) Addr() string { return b.Addrs()[0] }

// Addrs returns every broker's host:port, the bootstrap list for clients.
// They stay the same across Restart.
func (b *Broker) Addrs() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]string, len(b.ports))
	for i, p := range b.ports {
		out[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	}
	return out
}

// Cluster returns the running kfake cluster, for what kafkatest does not
// wrap (faults, group and partition inspection), or nil while stopped. A
// Restart replaces it.
func (b *Broker) Cluster() *kfake.Cluster {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cluster
}

// Stop shuts the cluster down and drops every client connection, as a crash
// of the whole cluster does. Restart brings it back on the same addresses.
func (b *Broker) Stop() {
	b.mu.Lock()
	cluster := b.cluster
	b.cluster = nil
	conns := make([]net.Conn, 0, len(b.conns))
	for c := range b.conns {
		conns = append(conns, c)
	}
	b.mu.Unlock()
	if cluster != nil {
		cluster.Close()
	}
	for _, c := range conns {
		_ = c.Close()
	}
}

// Restart stops the cluster if it runs and starts a fresh one on the same
// addresses, returning once it listens: the topics are there again, empty,
// and no consumer group or committed offset survives, as after a cluster
// that lost its disks. Clients must reconnect, rejoin their groups and
// resync.
func (b *Broker) Restart() error {
	b.Stop()
	b.mu.Lock()
	ports := append([]int(nil), b.ports...)
	b.mu.Unlock()
	// The old listeners' ports may take a moment to be free again.
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err = b.serve(ports); err == nil || !isAddrInUse(err) {
			return err
		}
	}
	return err
}

func isAddrInUse(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "listen"
}

// DropConnections closes every client connection the cluster holds, as a
// network failure does, and returns how many it closed. The cluster keeps
// its state; clients reconnect by themselves.
func (b *Broker) DropConnections() int {
	b.mu.Lock()
	conns := make([]net.Conn, 0, len(b.conns))
	for c := range b.conns {
		conns = append(conns, c)
	}
	b.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
	return len(conns)
}

// Close stops the cluster. It is idempotent.
func (b *Broker) Close() error {
	b.Stop()
	return nil
}

// Publish writes one record with key, value and headers to topic, in the
// partition Kafka's default partitioner picks for key (kafka.PartitionFor),
// as a foreign or broken producer would: use it to feed subscribers records
// that are not CloudEvents, or CloudEvents in structured mode. It connects
// (within ctx's deadline) as the first WithSASL user, which must be a PLAIN
// one, and over TLS without verifying the broker's certificate when the
// broker serves TLS. It blocks until the cluster acknowledged the record.
func (b *Broker) Publish(ctx context.Context, topic, key string, value []byte, headers ...sarama.RecordHeader) error {
	sc := sarama.NewConfig()
	sc.Version = sarama.V2_1_0_0
	sc.ClientID = "kafkatest"
	sc.Producer.Return.Successes = true
	sc.Producer.RequiredAcks = sarama.WaitForAll
	sc.Producer.Partitioner = sarama.NewManualPartitioner
	if b.cfg.tls != nil {
		sc.Net.TLS.Enable = true
		sc.Net.TLS.Config = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // a test helper talking to its own broker
	}
	if len(b.cfg.sasl) > 0 {
		u := b.cfg.sasl[0]
		if u.mechanism != kafka.SASLPlain {
			return fmt.Errorf("kafkatest: publish: authenticates with PLAIN users only, not %s", u.mechanism)
		}
		sc.Net.SASL.Enable, sc.Net.SASL.User, sc.Net.SASL.Password = true, u.name, u.password
	}
	if dl, ok := ctx.Deadline(); ok {
		sc.Net.DialTimeout = time.Until(dl)
	}
	client, err := sarama.NewClient(b.Addrs(), sc)
	if err != nil {
		return fmt.Errorf("kafkatest: publish: %w", err)
	}
	defer client.Close()
	partitions, err := client.Partitions(topic)
	if err != nil {
		return fmt.Errorf("kafkatest: publish to %s: %w", topic, err)
	}
	producer, err := sarama.NewSyncProducerFromClient(client)
	if err != nil {
		return fmt.Errorf("kafkatest: publish: %w", err)
	}
	defer producer.Close()
	msg := &sarama.ProducerMessage{
		Topic:     topic,
		Key:       sarama.StringEncoder(key),
		Value:     sarama.ByteEncoder(value),
		Partition: kafka.PartitionFor(key, int32(len(partitions))),
		Headers:   headers,
	}
	if _, _, err := producer.SendMessage(msg); err != nil {
		return fmt.Errorf("kafkatest: publish to %s: %w", topic, err)
	}
	return nil
}
