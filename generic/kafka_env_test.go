package generic_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/kafka"
	"github.com/workwire/sdk-go/options/kafka/kafkatest"
	"github.com/workwire/sdk-go/options/transporttest"
)

// The scenarios over Kafka: an embedded kfake cluster per scenario. Restart
// brings up a fresh cluster on the same addresses (no records, no groups,
// no committed offsets), so zero loss has to come from resync. But for
// the scenarios that restart it, each broker listens behind a proxy it
// advertises, which can make every connection open deaf: Kafka clients go
// where the metadata sends them.
func init() {
	registerEnv(envMaker{name: "kafka-kfake", make: func(t *testing.T, needRestart bool) *env {
		front := transporttest.NewFronted(transporttest.Kafka)
		t.Cleanup(func() { _ = front.Close() })
		var opts []kafkatest.Option
		if !needRestart {
			// A restart listens again where the cluster advertised itself,
			// which a proxy holds.
			opts = append(opts, kafkatest.WithKfakeOptions(kfake.ListenFn(front.Listen)))
		}
		b := kafkatest.NewBroker(t, opts...)
		return &env{
			// The proxies are every client's: the other side's consumer
			// goes deaf too, and finds it out the same way.
			deafen: func(t *testing.T, _ options.Transport) {
				if len(front.Proxies()) == 0 {
					t.Fatal("a broker made for a restart has no proxy to deafen")
				}
				front.Deafen()
			},
			transport: func(t *testing.T) options.Transport {
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
			},
			restart: func(t *testing.T) {
				if err := b.Restart(); err != nil {
					t.Fatal(err)
				}
			},
			sendRaw: func(t *testing.T, r options.Route, payload []byte) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := b.Publish(ctx, kafka.DefaultTopics().Topic(r.Role), kafka.Key(r), payload); err != nil {
					t.Fatal(err)
				}
			},
		}
	}})
}
