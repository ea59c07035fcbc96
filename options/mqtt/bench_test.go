package mqtt_test

import (
	"testing"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/options/mqtt/mqtttest"
	"github.com/workwire/sdk-go/options/transporttest"
)

// BenchmarkSendDeliver measures 2 KB events at QoS 1 from Send to Deliver
// through the embedded broker (mochi-mqtt), in each content mode.
func BenchmarkSendDeliver(b *testing.B) {
	for _, mode := range []string{mqtt.ContentModeBinary, mqtt.ContentModeStructured} {
		b.Run(mode, func(b *testing.B) {
			broker := mqtttest.NewBroker(b)
			transporttest.BenchSendDeliver(b, func() options.Transport {
				return newTransport(b, mqtt.Config{BrokerHost: broker.Addr(), ContentMode: mode})
			})
		})
	}
}
