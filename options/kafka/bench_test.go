package kafka_test

import (
	"testing"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/kafka"
	"github.com/workwire/sdk-go/options/kafka/kafkatest"
	"github.com/workwire/sdk-go/options/transporttest"
)

// BenchmarkSendDeliver measures 2 KB events from Send to Deliver through
// the embedded Kafka cluster (kfake); options/mqtt and options/grpc run the
// same benchmark for comparison.
func BenchmarkSendDeliver(b *testing.B) {
	cluster := kafkatest.NewBroker(b)
	cfg := kafka.Config{Brokers: cluster.Addrs()}
	transporttest.BenchSendDeliver(b, func() options.Transport { return newTransport(b, cfg) })
}
