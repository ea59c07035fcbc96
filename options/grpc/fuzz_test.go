package grpc_test

import (
	"testing"

	"github.com/workwire/sdk-go/options/grpc"
)

// FuzzConfig feeds config loading any bytes: a config or an error, never a
// panic; and a config that validates makes a transport.
func FuzzConfig(f *testing.F) {
	f.Add([]byte("serverAddress: 127.0.0.1:8090\n"))
	f.Add([]byte(`{"serverAddress":"h:1","keepAliveTime":"30s","tls":{"enabled":true}}`))
	f.Add([]byte("url: 127.0.0.1:8090\nkeepAliveConfig:\n  enable: true\n  time: 20s\nserverHealthinessTimeout: 40s\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := grpc.ParseConfig(data)
		if err != nil {
			return
		}
		if _, err := grpc.New(c); err != nil {
			t.Fatalf("a valid config did not make a transport: %v", err)
		}
	})
}
