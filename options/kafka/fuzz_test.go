package kafka_test

import (
	"testing"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/kafka"
)

// FuzzConfig feeds config loading any bytes: a config or an error, never a
// panic; and a config that validates makes a transport.
func FuzzConfig(f *testing.F) {
	f.Add([]byte("brokers: [127.0.0.1:9092]\nclientID: a\n"))
	f.Add([]byte(`{"brokers":["h:1"],"sasl":{"mechanism":"PLAIN","username":"u","password":"p"},"tls":{"enabled":true}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c kafka.Config
		if err := options.Unmarshal(data, &c); err != nil || c.Validate() != nil {
			return
		}
		if _, err := kafka.New(c); err != nil {
			t.Fatalf("a valid config did not make a transport: %v", err)
		}
	})
}
