package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/workwire/sdk-go/internal/testsupport/pgtest"
	"github.com/workwire/sdk-go/work/workstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func runDemo(t *testing.T, args ...string) {
	t.Helper()
	var out bytes.Buffer
	if err := run(context.Background(), args, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "answers as expected") {
		t.Errorf("the demonstration did not finish:\n%s", out.String())
	}
	if testing.Verbose() {
		t.Log(out.String())
	}
}

// With no flags: an in-process database and the gRPC broker.
func TestTheDemonstrationRunsWithNoFlags(t *testing.T) { runDemo(t) }

func TestTheDemonstrationOverMQTT(t *testing.T) { runDemo(t, "-transport", "mqtt") }

// Against PostgreSQL, over both transports (it leaves the database empty).
func TestTheDemonstrationOverPostgreSQL(t *testing.T) {
	dsn := pgtest.DSN(t)
	for _, transport := range []string{"grpc", "mqtt"} {
		t.Run(transport, func(t *testing.T) { runDemo(t, "-database", dsn, "-transport", transport) })
	}
}

// Every bad request gets a clear error, as a JSON Status, and writes
// nothing.
func TestBadRequestsWriteNothing(t *testing.T) {
	store := workstore.NewMemory()
	srv := httptest.NewServer(api{store: store}.handler())
	defer srv.Close()
	for _, c := range []struct {
		name, method, path, body string
		want                     int
		says                     string
	}{
		{"malformed JSON", "POST", "/clusters/cluster1/works", `{"metadata":`, 400, "not a ManifestWork"},
		{"an unknown field", "POST", "/clusters/cluster1/works", `{"metadata":{"name":"a"},"spek":{}}`, 400, `unknown field "spek"`},
		{"trailing data", "POST", "/clusters/cluster1/works", workJSON("a", "a", "1") + `{}`, 400, "data after the work"},
		{"a cluster that is not a DNS label", "POST", "/clusters/Cluster_1/works", workJSON("a", "a", "1"), 400, `cluster "Cluster_1"`},
		{"a name that is not a DNS subdomain", "POST", "/clusters/cluster1/works", workJSON("A_b", "a", "1"), 400, `name "A_b"`},
		{"a manifest without a kind", "POST", "/clusters/cluster1/works", `{"metadata":{"name":"a"},"spec":{"workload":{"manifests":[{"apiVersion":"v1"}]}}}`, 422, "apiVersion and kind"},
		{"an oversize work", "POST", "/clusters/cluster1/works", workJSON("a", "a", strings.Repeat("x", maxBodyBytes)), 413, "at most"},
		{"another cluster in the body", "POST", "/clusters/cluster1/works", strings.Replace(workJSON("a", "a", "1"), `"name":"a"`, `"name":"a","namespace":"cluster2"`, 1), 400, "the path names cluster"},
		{"an update without a version", "PUT", "/clusters/cluster1/works/a", workJSON("a", "a", "1"), 400, "resourceVersion"},
		{"an update of another name", "PUT", "/clusters/cluster1/works/b", workJSON("a", "a", "1"), 400, "the path names"},
		{"a missing work", "GET", "/clusters/cluster1/works/nope", "", 404, "not found"},
		{"an update of a missing work", "PUT", "/clusters/cluster1/works/a", strings.Replace(workJSON("a", "a", "1"), `"name":"a"`, `"name":"a","resourceVersion":"7"`, 1), 404, "not found"},
		{"a bad label selector", "GET", "/works?labelSelector=a%3D%3D%3D", "", 400, "labelSelector"},
		{"a bad limit", "GET", "/works?limit=x", "", 400, "limit"},
		{"a negative limit", "GET", "/works?limit=-1", "", 400, "limit"},
		{"a forged continue", "GET", "/works?continue=abc", "", 400, "continue"},
	} {
		req, err := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var status metav1.Status
		err = json.NewDecoder(resp.Body).Decode(&status)
		resp.Body.Close()
		if err != nil || resp.StatusCode != c.want || status.Kind != "Status" || int(status.Code) != c.want || !strings.Contains(status.Message, c.says) {
			t.Errorf("%s: %d %+v (%v); want %d, a Status saying %q", c.name, resp.StatusCode, status, err, c.want, c.says)
		}
	}
	if l, err := store.List(context.Background(), workstore.ListOptions{}); err != nil || len(l.Items) != 0 {
		t.Errorf("bad requests wrote %d works (%v)", len(l.Items), err)
	}
}

// BenchmarkCreateToApplied measures, through the API, how many works a
// second go from their create to their agent's Applied status stored
// (works/s), how many creates the API takes (creates/s), and the status
// writes behind them (statuses/s): 10 clusters with an agent each, 16 API
// clients. Over PostgreSQL when pgtest.DSNEnv names one, else in memory.
func BenchmarkCreateToApplied(b *testing.B) {
	for _, transport := range []string{"grpc", "mqtt"} {
		b.Run(transport, func(b *testing.B) { benchmarkCreateToApplied(b, transport) })
	}
}

func benchmarkCreateToApplied(b *testing.B, transport string) {
	const clusters, clients = 10, 16
	cfg := config{transport: transport, grpcAddr: "127.0.0.1:0", httpAddr: "127.0.0.1:0", agents: clusters}
	if os.Getenv(pgtest.DSNEnv) != "" {
		cfg.database = pgtest.DSN(b)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	svc, err := start(ctx, cfg, io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	defer svc.stop()
	var mu sync.Mutex
	applied, statuses := map[string]bool{}, 0
	allApplied := make(chan struct{})
	ready := make(chan struct{})
	watched := make(chan error, 1)
	go func() {
		watched <- svc.store.Watch(ctx, func(c workstore.Change) {
			if c.Op != workstore.StatusChanged {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			statuses++
			if !applied[c.UID] {
				applied[c.UID] = true
				if len(applied) == b.N {
					close(allApplied)
				}
			}
		}, ready)
	}()
	<-ready
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	defer client.CloseIdleConnections()
	b.ResetTimer()
	began := time.Now()
	var wg sync.WaitGroup
	next := make(chan int)
	for range clients {
		wg.Go(func() {
			for i := range next {
				body := workJSON(fmt.Sprintf("w%d", i), "bench", "1")
				resp, err := client.Post(fmt.Sprintf("%s/clusters/cluster%d/works", svc.base, i%clusters+1), "application/json", strings.NewReader(body))
				if err != nil {
					b.Error(err)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					b.Errorf("create w%d: %d", i, resp.StatusCode)
				}
			}
		})
	}
	for i := range b.N {
		next <- i
	}
	close(next)
	wg.Wait()
	created := time.Since(began)
	select {
	case <-allApplied:
	case <-time.After(5 * time.Minute):
		b.Fatalf("not every work applied in 5 minutes")
	}
	elapsed := time.Since(began)
	b.StopTimer()
	mu.Lock()
	n := statuses
	mu.Unlock()
	b.ReportMetric(float64(b.N)/created.Seconds(), "creates/s")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "works/s")
	b.ReportMetric(float64(n)/elapsed.Seconds(), "statuses/s")
	cancel()
	if err := <-watched; err != nil {
		b.Error(err)
	}
}
