package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	workclient "open-cluster-management.io/api/client/work/clientset/versioned"

	"github.com/workwire/sdk-go/internal/testsupport/kubetest"
	"github.com/workwire/sdk-go/internal/testsupport/pgtest"
	"github.com/workwire/sdk-go/internal/testsupport/testcerts"
	"github.com/workwire/sdk-go/options/transporttest"
	"github.com/workwire/sdk-go/work"
	"github.com/workwire/sdk-go/work/pgstore"
	"github.com/workwire/sdk-go/work/workstore"
)

// The command line in the go command's conventions: help on stdout, a
// bad command line or config file exit status 2 with what is wrong (the
// config file's line), before anything runs.
func TestTheCommandLine(t *testing.T) {
	good := file(t, "good.yaml", "listenAddress: 127.0.0.1:0")
	bad := file(t, "bad.yaml", "# a broker", "listenAddress: 127.0.0.1:0", "heartbeatIntervall: 1s")
	for _, tc := range []struct {
		args           []string
		code           int
		stdout, stderr string
	}{
		{args: nil, code: 2, stderr: "workwire <command>"},
		{args: []string{"help"}, code: 0, stdout: "broker"},
		{args: []string{"help", "broker"}, code: 0, stdout: "-config"},
		{args: []string{"help", "nosuch"}, code: 2, stderr: "unknown command"},
		{args: []string{"nosuch"}, code: 2, stderr: "unknown command"},
		{args: []string{"broker", "-h"}, code: 0, stderr: "-shutdown-timeout"},
		{args: []string{"broker", "-nosuch"}, code: 2, stderr: "flag provided but not defined: -nosuch"},
		{args: []string{"broker"}, code: 2, stderr: "-config is required"},
		{args: []string{"broker", "-config", good, "extra"}, code: 2, stderr: `unexpected arguments ["extra"]`},
		{args: []string{"broker", "-config", bad}, code: 2, stderr: `line 3: unknown field "heartbeatIntervall"`},
		{args: []string{"broker", "-config", good + ".missing"}, code: 2, stderr: "no such file"},
		{args: []string{"broker", "-config", good, "-services", "postgres"}, code: 2, stderr: "-services postgres needs -postgres-dsn"},
		{args: []string{"broker", "-config", good, "-services", "mongo"}, code: 2, stderr: `-services "mongo": want kube, postgres or none`},
		{args: []string{"broker", "-config", good, "-services", "postgres", "-postgres-dsn", "postgres://127.0.0.1:1/x"}, code: 2, stderr: "no way to authenticate callers"},
		{args: []string{"broker", "-config", good, "-services", "postgres", "-postgres-dsn", "postgres://127.0.0.1:1/x", "-authn", "cert,magic", "-authz", "none"}, code: 2,
			stderr: "-authn cert needs tls.clientCAFile"},
		{args: []string{"broker", "-config", good, "-kubeconfig", good + ".missing"}, code: 2, stderr: "kubeconfig"},
		{args: []string{"broker", "-config", good, "-log-format", "xml"}, code: 2, stderr: `-log-format "xml"`},
		{args: []string{"broker", "-config", good, "-tls-min-version", "VersionTLS11"}, code: 2, stderr: "VersionTLS11: below TLS 1.2, refused"},
		{args: []string{"broker", "-config", good, "-tls-min-version", "VersionTLS13"}, code: 2, stderr: "certFile and keyFile are required"},
		{args: []string{"broker", "-config", good, "-tls-profile", good + ".missing"}, code: 2, stderr: "TLS profile"},
		{args: []string{"broker", "-config", good, "-tls-profile", good}, code: 2, stderr: `unknown field "listenAddress"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := workwire(t, tc.args...)
			if code != tc.code || !strings.Contains(stdout, tc.stdout) || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("exit %d, want %d; stdout (want %q):\n%s\nstderr (want %q):\n%s", code, tc.code, tc.stdout, stdout, tc.stderr, stderr)
			}
		})
	}
}

// OCM's TLS profile, as a mounted ConfigMap, and OCM's TLS flags refuse
// the clients below them, the flags over the profile over the file.
func TestTheTLSProfileAndFlags(t *testing.T) {
	ca := testcerts.NewCA(t)
	cert := ca.Server(t, "127.0.0.1")
	profile := t.TempDir()
	for k, v := range map[string]string{"minTLSVersion": "VersionTLS12", "cipherSuites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"} {
		if err := os.WriteFile(filepath.Join(profile, k), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	config := []string{"tls:", "  certFile: " + cert.CertFile, "  keyFile: " + cert.KeyFile, "  minVersion: \"1.3\""}
	handshake := func(addr string, c *tls.Config) error {
		c.RootCAs, c.ServerName, c.NextProtos = ca.Pool(), "127.0.0.1", []string{"h2"}
		conn, err := tls.Dial("tcp", addr, c)
		if err == nil {
			conn.Close()
		}
		return err
	}
	tls12 := func(suite uint16) *tls.Config {
		return &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{suite}}
	}
	for _, tc := range []struct {
		name     string
		args     []string
		accepted []*tls.Config
		refused  []*tls.Config
	}{
		{"the file's minimum of 1.3", nil,
			[]*tls.Config{{MinVersion: tls.VersionTLS13}}, []*tls.Config{tls12(tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384)}},
		{"the profile's 1.2 and its suite", []string{"-tls-profile", profile},
			[]*tls.Config{tls12(tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384), {MinVersion: tls.VersionTLS13}}, []*tls.Config{tls12(tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256)}},
		{"the flags over the profile", []string{"-tls-profile", profile, "-tls-cipher-suites", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"},
			[]*tls.Config{tls12(tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256)}, []*tls.Config{tls12(tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384)}},
		{"-tls-min-version over the profile", []string{"-tls-profile", profile, "-tls-min-version", "VersionTLS13"},
			[]*tls.Config{{MinVersion: tls.VersionTLS13}}, []*tls.Config{tls12(tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := startBrokerWith(t, "broker", config, append([]string{"-services", "none", "-authn", "none", "-authz", "none"}, tc.args...)...)
			for _, c := range tc.accepted {
				if err := handshake(b.addr, c); err != nil {
					t.Errorf("a client of TLS %x..%x, suites %x, refused: %v", c.MinVersion, c.MaxVersion, c.CipherSuites, err)
				}
			}
			for _, c := range tc.refused {
				if err := handshake(b.addr, c); err == nil {
					t.Errorf("a client of TLS %x..%x, suites %x, accepted", c.MinVersion, c.MaxVersion, c.CipherSuites)
				}
			}
			b.stop(t)
		})
	}
}

// A broker over PostgreSQL serves a work written into the database to its
// agent and stores the agent's status; its admin port is healthy, ready
// and exports the broker's metrics; its logs name the agent's subscription
// when it opens and when it ends; SIGTERM ends it with exit status 0.
func TestABrokerOverPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	store := openStore(t, dsn)
	b := startBroker(t, "broker", "-services", "postgres", "-postgres-dsn", dsn, "-authn", "none", "-authz", "none")
	startAgent(t, b.addr, "cluster1")
	ctx := context.Background()
	created, err := store.Create(ctx, newWork("cluster1", "w1"))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the agent's status stored", time.Minute, func() bool {
		w, err := store.Get(ctx, "cluster1", "w1")
		return err == nil && appliedAt(w, created.Generation)
	})

	if code := b.get(t, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d", code)
	}
	code, metrics := b.fetch(t, "/metrics")
	for _, want := range []string{"grpc_server_ce_msg_received_total", `cluster="cluster1"`, "go_goroutines", "process_resident_memory_bytes"} {
		if code != http.StatusOK || !strings.Contains(metrics, want) {
			t.Errorf("/metrics (%d) lacks %s", code, want)
		}
	}
	if code := b.get(t, "/debug/pprof/"); code != http.StatusNotFound {
		t.Errorf("/debug/pprof/ without -pprof: %d, want 404", code)
	}
	if got := logged(b.Output(), "subscribed", "cluster", "cluster1", "user", "system:anonymous"); len(got) == 0 {
		t.Errorf("no log of cluster1's subscription:\n%s", b.Tail(30))
	}
	if code := b.stop(t); code != 0 {
		t.Errorf("exit status %d after SIGTERM, want 0:\n%s", code, b.Tail(30))
	}
	out := b.Output()
	for _, msg := range []string{"draining", "drained"} {
		if len(logged(out, msg)) != 1 {
			t.Errorf("want one %q line:\n%s", msg, b.Tail(30))
		}
	}
	if got := logged(out, "subscription ended", "cluster", "cluster1", "why", "the server is shutting down"); len(got) == 0 {
		t.Errorf("no log of cluster1's subscription ended by the drain:\n%s", b.Tail(30))
	}
}

// Two replicas over one database behind one address: works go on reaching
// their agents and every status is stored while one replica drains on
// SIGTERM (exit status 0), comes back, and the other is killed.
func TestReplicasDrainedAndKilled(t *testing.T) {
	dsn := pgtest.DSN(t)
	store := openStore(t, dsn)
	args := []string{"-services", "postgres", "-postgres-dsn", dsn, "-authn", "none", "-authz", "none"}
	a := startBroker(t, "replica-a", args...)
	b := startBroker(t, "replica-b", args...)
	proxy, err := transporttest.NewProxy(a.addr, b.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	const clusters = 4
	agents := make([]*work.ClientHolder, clusters)
	for i := range agents {
		agents[i] = startAgent(t, proxy.Addr(), fmt.Sprintf("cluster%d", i))
	}
	ctx := context.Background()
	total := 0
	create := func(n int) {
		t.Helper()
		for range n {
			if _, err := store.Create(ctx, newWork(fmt.Sprintf("cluster%d", total%clusters), fmt.Sprintf("w%d", total))); err != nil {
				t.Fatal(err)
			}
			total++
		}
	}
	applied := func() int {
		l, err := store.List(ctx, workstore.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for i := range l.Items {
			if appliedAt(&l.Items[i], 1) {
				n++
			}
		}
		return n
	}
	create(100)
	eventually(t, "100 statuses", 2*time.Minute, func() bool { return applied() == total })

	// Replica a drains while works are written; its agents move to b.
	var wg sync.WaitGroup
	wg.Go(func() {
		if code := a.stop(t); code != 0 {
			t.Errorf("replica a: exit status %d after SIGTERM:\n%s", code, a.Tail(30))
		}
	})
	create(100)
	wg.Wait()
	eventually(t, "200 statuses with replica a gone", 2*time.Minute, func() bool { return applied() == total })

	// a comes back on a new port; b is killed.
	a = startBroker(t, "replica-a2", args...)
	proxy.Add(a.addr)
	proxy.Kill(b.addr)
	b.Kill()
	create(100)
	eventually(t, "300 statuses with replica b killed", 2*time.Minute, func() bool { return applied() == total })
	for i, h := range agents {
		l, err := h.ManifestWorkInformer().Lister().ManifestWorks(fmt.Sprintf("cluster%d", i)).List(labels.Everything())
		if err != nil || len(l) != total/clusters {
			t.Errorf("cluster%d's agent holds %d works, want %d (%v)", i, len(l), total/clusters, err)
		}
	}
}

// A broker over a real kube-apiserver serves a ManifestWork to its
// agent, writes the agent's status to the work, and lets the deleted work
// go once the agent reported it deleted.
func TestABrokerOverAKubeAPIServer(t *testing.T) {
	cfg := kubetest.Start(t)
	kubetest.InstallOCMCRDs(t, cfg)
	kubetest.CreateNamespaces(t, cfg, "cluster1")
	b := startBroker(t, "broker", "-services", "kube", "-kubeconfig", kubetest.Kubeconfig(t, cfg), "-authn", "none", "-authz", "none")
	startAgent(t, b.addr, "cluster1")
	works := workclient.NewForConfigOrDie(cfg).WorkV1().ManifestWorks("cluster1")
	ctx := context.Background()
	created, err := works.Create(ctx, newWork("cluster1", "w1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the agent's status on the work", time.Minute, func() bool {
		w, err := works.Get(ctx, "w1", metav1.GetOptions{})
		return err == nil && appliedAt(w, created.Generation)
	})
	if err := works.Delete(ctx, "w1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deleted work gone", time.Minute, func() bool {
		_, err := works.Get(ctx, "w1", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if code := b.stop(t); code != 0 {
		t.Errorf("exit status %d after SIGTERM, want 0:\n%s", code, b.Tail(30))
	}
}

// openStore opens the works' store of dsn's schema for the test.
func openStore(t *testing.T, dsn string) workstore.Store {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store, err := pgstore.Open(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	return store
}
