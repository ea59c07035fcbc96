package generic_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/kafka"
	"github.com/workwire/sdk-go/options/kafka/kafkatest"
)

// The scenarios over Kafka: an embedded kfake cluster per scenario. Restart
// brings up a fresh cluster on the same addresses (no records, no groups,
// no committed offsets), so zero loss has to come from resync.
func init() {
	registerEnv(envMaker{name: "kafka-kfake", make: func(t *testing.T, _ bool) *env {
		b := kafkatest.NewBroker(t)
		return &env{
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
