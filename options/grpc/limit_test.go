package grpc_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc/grpctest"
	"github.com/workwire/sdk-go/options/grpc/server"
	"github.com/workwire/sdk-go/options/transporttest"
)

// An event too large fails with options.ErrTooLarge whichever side refuses
// it, and the error gives its size and names the settings to raise: the
// client's maxEventBytes when Send refuses it, the broker's maxReceiveBytes
// when the broker does.
func TestTooLargeNamesTheSettings(t *testing.T) {
	t.Parallel()
	srv := grpctest.NewServerWithConfig(t, server.Config{MaxReceiveBytes: 64 << 10})
	route := options.Route{Role: options.RoleSpec, Source: "hub", Cluster: "c1"}
	for _, tc := range []struct {
		name          string
		maxEventBytes int
		want          []string
	}{
		{"refused by Send", 32 << 10, []string{"more than maxEventBytes (Config.MaxEventBytes), 32768", "maxReceiveBytes"}},
		{"refused by the broker", 1 << 20, []string{"the broker refused", "maxReceiveBytes", "larger than max (", "vs. 65536)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := srv.Config()
			cfg.MaxEventBytes = tc.maxEventBytes
			tr := newTransport(t, cfg)
			startTransport(t, tr, nil, transporttest.NewRecorder())
			evt := transporttest.NewEvent("big-"+strings.ReplaceAll(tc.name, " ", "-"), "spec.create_request")
			_ = evt.SetData(cloudevents.ApplicationJSON, map[string]string{"pad": strings.Repeat("x", 100<<10)})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := tr.Send(ctx, route, transporttest.OnRoute(evt, route))
			if !errors.Is(err, options.ErrTooLarge) {
				t.Fatalf("Send: %v, want ErrTooLarge", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Send: %v\nwant it to say %q", err, w)
				}
			}
		})
	}
}
