package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/internal/testsupport/proctest"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc"
	"github.com/workwire/sdk-go/work"
)

// bin is the workwire program, built once for the test run.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "workwire-cmd")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "workwire")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build workwire:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		// Pub/Sub's client library starts OpenCensus's worker when it is
		// linked, for the life of the process.
		// Sarama's consumer starts go-metrics' process-wide ticker.
		if err := goleak.Find(goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"),
			goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick")); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// workwire runs the program to its end with args and returns its exit
// status, stdout and stderr.
func workwire(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil && cmd.ProcessState == nil {
		t.Fatalf("workwire %v: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// file writes a file of the test's with these lines and returns its path.
func file(t *testing.T, name string, lines ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// brokerProc is a `workwire broker` running for a test.
type brokerProc struct {
	*proctest.Process
	addr, admin string // where it serves gRPC and its admin port
}

// startBroker runs `workwire broker` with args (its gRPC port and admin
// port chosen by the OS) and returns once it is ready.
func startBroker(t *testing.T, name string, args ...string) *brokerProc {
	t.Helper()
	return startBrokerWith(t, name, nil, args...)
}

// startBrokerWith is startBroker with more lines in its config file.
func startBrokerWith(t *testing.T, name string, config []string, args ...string) *brokerProc {
	t.Helper()
	cfg := file(t, name+".yaml", append([]string{"listenAddress: 127.0.0.1:0", "heartbeatInterval: 1s"}, config...)...)
	p := proctest.Start(t, name, bin, nil, append([]string{"broker", "-config", cfg, "-admin-address", "127.0.0.1:0", "-log-format", "json"}, args...)...)
	b := &brokerProc{Process: p}
	deadline := time.Now().Add(2 * time.Minute)
	for b.addr == "" || b.admin == "" {
		if err := p.Exited(); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not serve in 2 minutes:\n%s", name, p.Tail(30))
		}
		time.Sleep(20 * time.Millisecond)
		for _, l := range logLines(p.Output()) {
			switch l["msg"] {
			case "serving":
				b.addr, _ = l["address"].(string)
			case "admin port":
				b.admin, _ = l["address"].(string)
			}
		}
	}
	for b.get(t, "/readyz") != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready in 2 minutes:\n%s", name, p.Tail(30))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return b
}

// get returns the status code of the admin port's path.
func (b *brokerProc) get(t *testing.T, path string) int {
	code, _ := b.fetch(t, path)
	return code
}

func (b *brokerProc) fetch(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + b.admin + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// stop sends SIGTERM and returns the exit status, failing t if the broker
// runs on after a minute.
func (b *brokerProc) stop(t *testing.T) int {
	t.Helper()
	if err := b.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	st := b.Wait(time.Minute)
	if st == nil {
		t.Fatalf("%s runs a minute after SIGTERM:\n%s", b.Name(), b.Tail(30))
	}
	return st.ExitCode()
}

// logLines are the JSON log lines in out.
func logLines(out string) []map[string]any {
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l map[string]any
		if json.Unmarshal(sc.Bytes(), &l) == nil {
			lines = append(lines, l)
		}
	}
	return lines
}

// logged returns the log lines of out whose message is msg and whose keys
// have these values.
func logged(out, msg string, kv ...string) []map[string]any {
	var found []map[string]any
next:
	for _, l := range logLines(out) {
		if l["msg"] != msg {
			continue
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if fmt.Sprint(l[kv[i]]) != kv[i+1] {
				continue next
			}
		}
		found = append(found, l)
	}
	return found
}

func newWork(cluster, name string) *workv1.ManifestWork {
	return &workv1.ManifestWork{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cluster},
		Spec: workv1.ManifestWorkSpec{Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{{RawExtension: runtime.RawExtension{
			Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `","namespace":"default"},"data":{"k":"v"}}`)}}}}},
	}
}

// startAgent starts cluster's work agent, connected to the broker at addr:
// it reports every work it holds Applied at its generation; a deleted work
// it lets go (the holder reports it Deleted).
func startAgent(t *testing.T, addr, cluster string) *work.ClientHolder {
	t.Helper()
	return startAgentOver(t, grpcConfig(addr), cluster, true)
}

// grpcConfig is the config of a client of the broker at addr.
func grpcConfig(addr string) *grpc.Config {
	return &grpc.Config{ServerAddress: addr, ReconnectMaxBackoff: options.Duration(500 * time.Millisecond)}
}

var discard = logr.Discard()

// startAgentOver starts cluster's work agent over the transport cfg
// configures; unless it reports, it takes works and says nothing of them,
// as an agent whose controller is stuck.
func startAgentOver(t *testing.T, cfg any, cluster string, reports bool) *work.ClientHolder {
	t.Helper()
	h, err := work.NewClientHolderBuilder(cfg).WithClusterName(cluster).WithLogger(logr.Discard()).
		WithAgentOptions(generic.WithResyncInterval(0)).NewClientHolder()
	if err != nil {
		t.Fatal(err)
	}
	if !reports {
		startHolder(t, h)
		return h
	}
	works := h.WorkInterface().WorkV1().ManifestWorks(cluster)
	apply := func(obj any) {
		w, ok := obj.(*workv1.ManifestWork)
		if !ok || w.DeletionTimestamp != nil || appliedAt(w, w.Generation) {
			return
		}
		applied := w.DeepCopy()
		meta.SetStatusCondition(&applied.Status.Conditions, metav1.Condition{Type: workv1.WorkApplied, Status: metav1.ConditionTrue,
			Reason: "Applied", ObservedGeneration: w.Generation})
		if _, err := works.UpdateStatus(context.Background(), applied, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			t.Errorf("update status of %s: %v", w.Name, err)
		}
	}
	if _, err := h.ManifestWorkInformer().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: apply, UpdateFunc: func(_, obj any) { apply(obj) },
	}); err != nil {
		t.Fatal(err)
	}
	startHolder(t, h)
	return h
}

// startHolder starts h and closes it when t ends.
func startHolder(t *testing.T, h *work.ClientHolder) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := h.Close(ctx); err != nil {
			t.Errorf("close holder: %v", err)
		}
	})
}

func appliedAt(w *workv1.ManifestWork, generation int64) bool {
	c := meta.FindStatusCondition(w.Status.Conditions, workv1.WorkApplied)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == generation
}

func eventually(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
