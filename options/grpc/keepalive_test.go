package grpc

import (
	"testing"
	"time"

	"google.golang.org/grpc/keepalive"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc/server"
)

// The keep-alive pings the client dials with follow Config, and the
// defaults stay within what the broker's default policy tolerates (a client
// pinging more often is disconnected with "too many pings").
func TestKeepaliveParams(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    Config
		want   keepalive.ClientParameters
		wantOn bool
	}{
		{"defaults", Config{}, keepalive.ClientParameters{Time: DefaultKeepAliveTime, Timeout: DefaultKeepAliveTimeout, PermitWithoutStream: true}, true},
		{"configured", Config{KeepAliveTime: options.Duration(time.Minute), KeepAliveTimeout: options.Duration(5 * time.Second)},
			keepalive.ClientParameters{Time: time.Minute, Timeout: 5 * time.Second, PermitWithoutStream: true}, true},
		{"off", Config{KeepAliveTime: options.Duration(-1)}, keepalive.ClientParameters{}, false},
	} {
		got, on := keepaliveParams(tc.cfg.withDefaults())
		if on != tc.wantOn || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v, %v", tc.name, got, on, tc.want, tc.wantOn)
		}
	}
	if DefaultKeepAliveTime < server.DefaultMinClientPingInterval {
		t.Errorf("the client pings every %v by default, more often than the server tolerates (%v)", DefaultKeepAliveTime, server.DefaultMinClientPingInterval)
	}
	// The dial options carry them (one option more than with pings off).
	on, err := New(Config{ServerAddress: "h:1"})
	if err != nil {
		t.Fatal(err)
	}
	off, err := New(Config{ServerAddress: "h:1", KeepAliveTime: options.Duration(-1)})
	if err != nil {
		t.Fatal(err)
	}
	if n, m := len(on.dialOptions()), len(off.dialOptions()); n != m+1 {
		t.Errorf("%d dial options with keep-alive and %d without, want one more with", n, m)
	}
}
