package grpc_test

import (
	"testing"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc"
)

// FuzzConfig feeds config loading any bytes: a config or an error, never a
// panic; and a config that validates makes a transport.
func FuzzConfig(f *testing.F) {
	f.Add([]byte("serverAddress: 127.0.0.1:8090\n"))
	f.Add([]byte(`{"serverAddress":"h:1","keepAliveTime":"30s","tls":{"enabled":true}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c grpc.Config
		if err := options.Unmarshal(data, &c); err != nil || c.Validate() != nil {
			return
		}
		if _, err := grpc.New(c); err != nil {
			t.Fatalf("a valid config did not make a transport: %v", err)
		}
	})
}
