package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/workwire/sdk-go/internal/testsupport/pgtest"
	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/options/mqtt/mqtttest"
	"github.com/workwire/sdk-go/pending"
	"github.com/workwire/sdk-go/work"
)

// pendingReport runs `workwire pending -o json` with args and returns the
// report it printed.
func pendingReport(t *testing.T, args ...string) pending.Report {
	t.Helper()
	code, stdout, stderr := workwire(t, append([]string{"pending", "-o", "json"}, args...)...)
	var r pending.Report
	if code != 0 {
		t.Fatalf("workwire pending: exit %d:\n%s", code, stderr)
	}
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("workwire pending -o json: %v:\n%s", err, stdout)
	}
	return r
}

// A hub whose agent for cluster2 stopped waits for exactly cluster2's
// works, and `workwire pending` lists them, by name, from the hub's
// pending endpoint; cluster1's, acknowledged, are not listed.
func TestPendingListsTheWorksOfAStoppedAgent(t *testing.T) {
	cfg := &mqtt.Config{BrokerHost: mqtttest.NewBroker(t).Addr()}
	hub, err := work.NewClientHolderBuilder(cfg).WithSourceID("hub").WithLogger(discard).NewClientHolder()
	if err != nil {
		t.Fatal(err)
	}
	startHolder(t, hub)
	startAgentOver(t, cfg, "cluster1", true)
	stopped := startAgentOver(t, cfg, "cluster2", true)
	ctx := context.Background()
	if err := stopped.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, cluster := range []string{"cluster1", "cluster2"} {
		for i := range 3 {
			if _, err := hub.WorkInterface().WorkV1().ManifestWorks(cluster).Create(ctx, newWork(cluster, fmt.Sprintf("w%d", i)), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	eventually(t, "cluster1's works acknowledged", time.Minute, func() bool {
		works, err := hub.ManifestWorkInformer().Lister().ManifestWorks("cluster1").List(labels.Everything())
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, w := range works {
			if appliedAt(w, w.Generation) {
				n++
			}
		}
		return n == 3 && hub.Pending(pending.Query{}).Waiting == 3
	})
	mux := http.NewServeMux()
	mux.Handle(pending.DefaultPath, pending.Handler(hub))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()

	r := pendingReport(t, addr)
	var names []string
	for _, s := range r.Specs {
		names = append(names, s.Name)
	}
	slices.Sort(names)
	if want := []string{"cluster2/w0", "cluster2/w1", "cluster2/w2"}; !slices.Equal(names, want) || r.Waiting != 3 || r.ClustersWaiting != 1 || r.Clusters[0].Name != "cluster2" {
		t.Errorf("pending: %v, %d waiting from %d agents (%+v); want %v from cluster2", names, r.Waiting, r.ClustersWaiting, r.Clusters, want)
	}
	if r := pendingReport(t, "-top", "1", addr); r.Waiting != 3 || len(r.Specs) != 1 {
		t.Errorf("-top 1: %d waiting, %d listed; want 3 and 1", r.Waiting, len(r.Specs))
	}
	if r := pendingReport(t, "-cluster", "cluster1", "http://"+addr+pending.DefaultPath); r.Waiting != 0 {
		t.Errorf("-cluster cluster1: %d waiting, want 0", r.Waiting)
	}
	code, stdout, stderr := workwire(t, "pending", addr)
	for _, want := range []string{"3 specs wait for an acknowledgement from 1 agents", "cluster2  manifestbundles", "cluster2/w0"} {
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("workwire pending: exit %d, want %q in:\n%s%s", code, want, stdout, stderr)
		}
	}
	if code, _, stderr := workwire(t, "pending", "127.0.0.1:1"); code != 1 || !strings.Contains(stderr, "connection refused") {
		t.Errorf("workwire pending at nothing: exit %d, %s", code, stderr)
	}
	if code, _, stderr := workwire(t, "pending", "-top", "0", addr); code != 2 || !strings.Contains(stderr, "want 1 to") {
		t.Errorf("workwire pending -top 0: exit %d, %s", code, stderr)
	}
}

// The broker waits for the works it sent an agent that takes them and
// reports nothing (its controller stuck), and its admin port lists exactly
// those.
func TestTheBrokersPendingListsTheWorksOfAStuckAgent(t *testing.T) {
	dsn := pgtest.DSN(t)
	store := openStore(t, dsn)
	b := startBroker(t, "broker", "-services", "postgres", "-postgres-dsn", dsn, "-authn", "none", "-authz", "none")
	startAgent(t, b.addr, "cluster1")
	startAgentOver(t, grpcConfig(b.addr), "cluster2", false)
	ctx := context.Background()
	var stuck []string
	for _, cluster := range []string{"cluster1", "cluster2"} {
		for i := range 2 {
			w, err := store.Create(ctx, newWork(cluster, fmt.Sprintf("w%d", i)))
			if err != nil {
				t.Fatal(err)
			}
			if cluster == "cluster2" {
				stuck = append(stuck, string(w.UID))
			}
		}
	}
	eventually(t, "cluster1's works acknowledged", time.Minute, func() bool {
		for i := range 2 {
			w, err := store.Get(ctx, "cluster1", fmt.Sprintf("w%d", i))
			if err != nil || !appliedAt(w, w.Generation) {
				return false
			}
		}
		return true
	})
	var r pending.Report
	eventually(t, "cluster2's works pending", time.Minute, func() bool {
		r = pendingReport(t, b.admin)
		return r.Waiting == 2
	})
	var ids []string
	for _, s := range r.Specs {
		ids = append(ids, s.ResourceID)
	}
	slices.Sort(ids)
	slices.Sort(stuck)
	if !slices.Equal(ids, stuck) || r.ClustersWaiting != 1 || r.Clusters[0].Name != "cluster2" {
		t.Errorf("pending: %v of %+v, want cluster2's %v", ids, r.Clusters, stuck)
	}
}
