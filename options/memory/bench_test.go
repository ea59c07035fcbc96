package memory_test

import (
	"testing"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/memory"
	"github.com/workwire/sdk-go/options/transporttest"
)

// BenchmarkSendDeliver is the transport path with no network: the floor
// under the others.
func BenchmarkSendDeliver(b *testing.B) {
	broker := memory.NewBroker()
	transporttest.BenchSendDeliver(b, func() options.Transport { return broker.Transport() })
}
