package bench

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/examples/internal/cmdutil"
	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestBenchRunsEveryPhase(t *testing.T) {
	for _, tc := range []struct{ transport, contentMode, compression string }{
		{transport: "mqtt"}, {transport: "mqtt", contentMode: "structured"}, {transport: "grpc", compression: "gzip"},
	} {
		t.Run(tc.transport+tc.contentMode+tc.compression, func(t *testing.T) {
			cfg := defaultConfig()
			cfg.works, cfg.clusters, cfg.timeout = 60, 3, time.Minute
			cfg.transport, cfg.contentMode, cfg.compression = tc.transport, tc.contentMode, tc.compression
			var progress bytes.Buffer
			res, err := run(context.Background(), cfg, &progress)
			if err != nil {
				t.Fatalf("%v\n%s", err, progress.String())
			}
			if len(res.Phases) != len(allPhases) {
				t.Fatalf("%d phases measured, want %d", len(res.Phases), len(allPhases))
			}
			for _, p := range res.Phases {
				if p.WorksPerSec <= 0 {
					t.Errorf("phase %s: %v works/s", p.Name, p.WorksPerSec)
				}
				if counted := p.WireBytes > 0; counted != (tc.transport == "grpc") {
					t.Errorf("phase %s: %d bytes on the wire", p.Name, p.WireBytes)
				}
			}
			var out bytes.Buffer
			res.print(&out)
			if !strings.Contains(out.String(), "deliver") || !strings.Contains(out.String(), "heap per work") || !strings.Contains(out.String(), "sends that failed") {
				t.Errorf("table:\n%s", out.String())
			}
		})
	}
}

func TestBenchRejectsBadFlags(t *testing.T) {
	cfg := defaultConfig()
	cfg.phases = []string{"nope"}
	if _, err := run(context.Background(), cfg, &bytes.Buffer{}); err == nil {
		t.Fatal("accepted an unknown phase")
	}
	for _, bad := range []struct{ transport, flag, value string }{
		{"mqtt", "-content-mode", "Structured"}, {"grpc", "-content-mode", "structured"},
		{"grpc", "-compression", "zstd"}, {"mqtt", "-compression", "gzip"},
	} {
		cfg := defaultConfig()
		cfg.transport = bad.transport
		if bad.flag == "-content-mode" {
			cfg.contentMode = bad.value
		} else {
			cfg.compression = bad.value
		}
		if _, err := run(context.Background(), cfg, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), bad.flag) {
			t.Errorf("-transport %s %s %s: %v, want an error naming %s", bad.transport, bad.flag, bad.value, err, bad.flag)
		}
	}
}

// The command line's flags reach the run; a bad one is a usage error.
func TestBenchRunTakesFlags(t *testing.T) {
	var out, progress bytes.Buffer
	err := Run(context.Background(), []string{"-works", "20", "-clusters", "2", "-phases", "raw,deliver", "-json"}, &out, &progress)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if !strings.Contains(out.String(), `"works": 20`) || !strings.Contains(out.String(), `"name": "deliver"`) {
		t.Errorf("output:\n%s", out.String())
	}
	var usage cmdutil.UsageError
	for _, args := range [][]string{{"-works", "many"}, {"extra"}} {
		if err := Run(context.Background(), args, &out, &progress); !errors.As(err, &usage) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
}

// The transports that are modules of their own are not linked here; asking
// for one says where they run.
func TestBenchSaysWhereNATSAndPubSubRun(t *testing.T) {
	for _, transport := range []string{"nats", "pubsub"} {
		err := Run(context.Background(), []string{"-transport", transport}, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "go -C examples/brokers run ./bench -transport "+transport) {
			t.Errorf("-transport %s: %v, want where it runs", transport, err)
		}
	}
}

// The clients' failures are counted, as their discarded logs would have
// told them: only sends that failed, every skipped event, every resend.
func TestBenchCountsWhatTheClientsLogsWouldSay(t *testing.T) {
	var c clientCounts
	et := types.EventType{DataType: codec.ManifestBundlesDataType, SubResource: types.SubResourceStatus, Action: types.UpdateRequest}
	c.EventSent(generic.SideAgent, et, nil)
	c.EventSent(generic.SideAgent, et, context.DeadlineExceeded)
	c.EventSent(generic.SideSource, et, errors.New("refused"))
	c.EventDropped(generic.SideSource, generic.DropOutOfOrder)
	c.SpecResent(codec.ManifestBundlesDataType)
	if got := [3]int64{c.sendsFailed.Load(), c.eventsDropped.Load(), c.specsResent.Load()}; got != [3]int64{2, 1, 1} {
		t.Errorf("failed sends, skipped events, resent specs = %v, want [2 1 1]", got)
	}
}
