package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/workwire/sdk-go/internal/testsupport/kubetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func wantAllSteps(t *testing.T, out string, clusters int, wants ...string) {
	t.Helper()
	wants = append(wants, `ManifestWork "hello" applied on every cluster`, `ManifestWork "after-rotation" applied on every cluster`,
		"every agent's first certificate has expired", "all steps done")
	for i := 1; i <= clusters; i++ {
		c := "cluster" + string(rune('0'+i))
		wants = append(wants, "approved CSR "+c+"-", c+": joined in", c+": certificate rotated in", "hub: "+c+"'s lease renewed",
			"hub: "+c+"'s status reached the hub", "accepted cluster "+c)
	}
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q", want)
		}
	}
}

// The example with its defaults, as CI and its README run it: the
// stand-in hub, one replica, three agents.
func TestTheExampleRunsWithItsDefaults(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), nil, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if testing.Verbose() {
		t.Log(out.String())
	}
	wantAllSteps(t, out.String(), 3)
	if t.Failed() && !testing.Verbose() {
		t.Log(out.String())
	}
}

// The same against a real kube-apiserver, with two server replicas, one of
// which is killed.
func TestTheExampleSurvivesAReplicaOverAKubeAPIServer(t *testing.T) {
	cfg := kubetest.Start(t)
	kubetest.InstallOCMCRDs(t, cfg)
	hub, err := clientsFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := runExample(context.Background(), hub, config{agents: 3, replicas: 2, killReplica: true, validity: 12 * time.Second, timeout: 2 * time.Minute}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if testing.Verbose() {
		t.Log(out.String())
	}
	wantAllSteps(t, out.String(), 3, "replica 0 killed", `ManifestWork "after-failover" applied on every cluster`, "every agent renewed its lease through replica 1")
	if t.Failed() && !testing.Verbose() {
		t.Log(out.String())
	}
}

func TestTheExampleRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-agents", "0"}, {"-kill-replica"}, {"-validity", "1s"}, {"extra"}} {
		if err := run(context.Background(), args, &bytes.Buffer{}); err == nil {
			t.Errorf("%q: accepted", args)
		}
	}
}
