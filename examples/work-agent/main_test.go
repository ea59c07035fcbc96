package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"

	"github.com/workwire/sdk-go/examples/hub-controller/hub"
	"github.com/workwire/sdk-go/examples/internal/cmdtest"
	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/options/mqtt/mqtttest"
	"github.com/workwire/sdk-go/options/transporttest"
	"github.com/workwire/sdk-go/work"
)

// With cmdtest.ArgsEnv set, the test binary is the command.
func TestMain(m *testing.M) {
	cmdtest.RunMain("work-agent", main)
	goleak.VerifyTestMain(m)
}

// syncBuffer is a bytes.Buffer that several goroutines can write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The agent as its command line starts it, serving the hub controller's
// lifecycle.
func TestAgentServesTheHubLifecycle(t *testing.T) {
	broker := mqtttest.NewBroker(t)
	out := &syncBuffer{}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-broker", broker.Addr(), "-cluster", "edge-1", "-status-update-frequency", "5s"}, out)
	}()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
		got := out.String()
		for _, want := range []string{
			"applying to an in-memory cluster",
			"agent of cluster edge-1 started",
			"work edge-1/web-1 generation 2: applied 1/1, available 1/1, feedback [replicas=2 readyReplicas=2 availableReplicas=2 ready=2 availableCondition=True]",
			"work edge-1/web-1 deleted: 1 resource(s) removed, 0 orphaned",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("agent output lacks %q:\n%s", want, got)
			}
		}
	}()

	h, err := work.NewClientHolderBuilder(&mqtt.Config{BrokerHost: broker.Addr()}).WithSourceID("hub").WithLogger(logr.Discard()).NewClientHolder()
	if err != nil {
		t.Fatal(err)
	}
	var hubOut bytes.Buffer
	if err := hub.Run(context.Background(), hub.Config{Holder: h, Clusters: []string{"edge-1"}, Works: 2, Lifecycle: true, Timeout: 20 * time.Second}, &hubOut); err != nil {
		t.Fatalf("%v\n%s", err, hubOut.String())
	}
}

func TestFlags(t *testing.T) {
	cases := []struct {
		args []string
		want string
		is   error
	}{
		{args: []string{"-cluster", "c1"}, want: "no broker"},
		{args: []string{"-broker-config", "/nonexistent/mqtt.yaml"}, want: "/nonexistent/mqtt.yaml"},
		{args: []string{"-hub-kubeconfig", "/nonexistent/hub"}, want: "/nonexistent/hub"},
		{args: []string{"-broker", "127.0.0.1:1", "-kubeconfig", "/nonexistent/cluster"}, want: "/nonexistent/cluster"},
		{args: []string{"-broker", "127.0.0.1:1", "-cluster", ""}, want: "no cluster name"},
		{args: []string{"-broker", "127.0.0.1:1", "extra"}, want: "unexpected arguments"},
		{args: []string{"-h"}, is: flag.ErrHelp},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			err := run(context.Background(), tc.args, &bytes.Buffer{})
			if err == nil || (tc.is != nil && !errors.Is(err, tc.is)) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run(%q) = %v, want an error with %q", tc.args, err, tc.want)
			}
		})
	}
}

// An operator who starts an agent before its broker learns so at once, at
// the default log level, and why.
func TestADeadBrokerIsReportedAtOnce(t *testing.T) {
	addr := transporttest.ClosedAddr(t)
	lines, took := cmdtest.FirstConnectFailure(t, "-broker", addr)
	cmdtest.CheckFirstFailure(t, lines, addr)
	t.Logf("the first failure was logged %v after the start", took)
}
