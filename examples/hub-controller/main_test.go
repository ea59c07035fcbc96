package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"

	"github.com/workwire/sdk-go/examples/internal/cmdtest"
	"github.com/workwire/sdk-go/examples/work-agent/agent"
	"github.com/workwire/sdk-go/examples/work-agent/fakecluster"
	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/options/transporttest"
	"github.com/workwire/sdk-go/work"
)

// With cmdtest.ArgsEnv set, the test binary is the command.
func TestMain(m *testing.M) {
	cmdtest.RunMain("hub-controller", main)
	goleak.VerifyTestMain(m)
}

// output collects what run prints, and tells when the embedded broker's
// address appears.
type output struct {
	mu   sync.Mutex
	b    bytes.Buffer
	addr chan string // gets the address once
	sent bool
}

var brokerLine = regexp.MustCompile(`embedded MQTT broker on (\S+)`)

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.b.Write(p)
	if m := brokerLine.FindStringSubmatch(o.b.String()); m != nil && !o.sent {
		o.sent = true
		o.addr <- m[1]
	}
	return len(p), nil
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// The README's two terminals: the hub with an embedded broker and
// -lifecycle, and an agent per cluster started with the address it prints.
func TestHubAndAgentsFromTwoTerminals(t *testing.T) {
	out := &output{addr: make(chan string, 1)}
	hubDone := make(chan error, 1)
	go func() {
		hubDone <- run(context.Background(), []string{
			"-embedded-broker", "-clusters", "cluster1, cluster2", "-works", "4", "-lifecycle", "-timeout", "20s",
		}, out)
	}()

	var addr string
	select {
	case addr = <-out.addr:
	case err := <-hubDone:
		t.Fatalf("the hub ended before it printed its broker's address: %v\n%s", err, out)
	case <-time.After(10 * time.Second):
		t.Fatalf("the hub printed no broker address:\n%s", out)
	}

	// "The second terminal": one agent per cluster.
	agentsCtx, stopAgents := context.WithCancel(context.Background())
	var agents sync.WaitGroup
	for _, cluster := range []string{"cluster1", "cluster2"} {
		h, err := work.NewClientHolderBuilder(&mqtt.Config{BrokerHost: addr}).WithClusterName(cluster).WithLogger(logr.Discard()).NewClientHolder()
		if err != nil {
			t.Fatal(err)
		}
		c := fakecluster.New()
		agents.Go(func() {
			if err := agent.Run(agentsCtx, agent.Config{Holder: h, Cluster: cluster, Client: c.Client, Mapper: c.Mapper}, &bytes.Buffer{}); err != nil {
				t.Errorf("agent of %s: %v", cluster, err)
			}
		})
	}
	defer agents.Wait()
	defer stopAgents()

	if err := <-hubDone; err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	got := strings.Join(strings.Fields(out.String()), " ")
	for _, want := range []string{
		"start an agent: go run ./examples/work-agent -broker " + addr + " -cluster cluster2",
		"placing 8 works (4 on each of cluster1, cluster2)",
		"created and Available 8/8", "updated to 2 replicas 8/8", "deleted, agents confirmed 8/8",
		"summary: 8 works on 2 clusters",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	t.Log(out.String())
}

func TestFlags(t *testing.T) {
	cases := []struct {
		args []string
		want string
		is   error
	}{
		{args: []string{"-lifecycle"}, want: "no broker"},
		{args: []string{"-kubeconfig", "/nonexistent/kubeconfig"}, want: "/nonexistent/kubeconfig"},
		{args: []string{"-broker", "127.0.0.1:1", "-works", "0"}, want: "works per cluster 0"},
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

// An operator who starts the hub before its broker learns so at once, at
// the default log level, and why.
func TestADeadBrokerIsReportedAtOnce(t *testing.T) {
	addr := transporttest.ClosedAddr(t)
	lines, took := cmdtest.FirstConnectFailure(t, "-broker", addr)
	cmdtest.CheckFirstFailure(t, lines, addr)
	t.Logf("the first failure was logged %v after the start", took)
}
