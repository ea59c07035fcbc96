// Package benchworks is what the bench (examples/bench) and the comparison
// with OCM's sdk-go (internal/tests/interop/compare) measure with, so that
// both carry the same bytes and count the same way: the works, the status
// an agent reports, counting what arrived, and the process's peak resident
// set.
package benchworks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	goruntime "runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	workv1client "open-cluster-management.io/api/client/work/clientset/versioned/typed/work/v1"
	workv1 "open-cluster-management.io/api/work/v1"
)

// ClusterName is the cluster of the i-th work of a run over clusters.
func ClusterName(i, clusters int) string { return fmt.Sprintf("cluster-%d", i%clusters) }

// Works makes n works spread over clusters, named work-0 to work-(n-1):
// a Deployment of about manifestBytes each.
func Works(n, clusters, manifestBytes int) []*workv1.ManifestWork {
	tmpl := deployment(placeholder, manifestBytes)
	works := make([]*workv1.ManifestWork, n)
	for i := range works {
		name := fmt.Sprintf("work-%d", i)
		works[i] = &workv1.ManifestWork{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ClusterName(i, clusters), Labels: map[string]string{"bench": "true"}},
			Spec: workv1.ManifestWorkSpec{Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{
				{RawExtension: runtime.RawExtension{Raw: bytes.ReplaceAll(tmpl, []byte(placeholder), []byte(name))}},
			}}},
		}
	}
	return works
}

const placeholder = "NAME-PLACEHOLDER"

// deployment is a Deployment manifest padded to about size bytes with
// realistic content: labels, annotations, env, resources, probes.
func deployment(name string, size int) []byte {
	env := []map[string]string{}
	d := map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{
			"name": name, "namespace": "default",
			"labels":      map[string]string{"app": name, "team": "platform", "tier": "web"},
			"annotations": map[string]string{"workwire.io/bench": "true"},
		},
		"spec": map[string]any{
			"replicas": 2,
			"selector": map[string]any{"matchLabels": map[string]string{"app": name}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]string{"app": name}},
				"spec": map[string]any{"containers": []any{map[string]any{
					"name": "web", "image": "registry.example.com/web:1.27.3",
					"ports":          []any{map[string]any{"containerPort": 8080, "name": "http"}},
					"resources":      map[string]any{"requests": map[string]string{"cpu": "100m", "memory": "128Mi"}, "limits": map[string]string{"memory": "256Mi"}},
					"readinessProbe": map[string]any{"httpGet": map[string]any{"path": "/healthz", "port": 8080}, "periodSeconds": 10},
					"env":            &env,
				}}},
			},
		},
	}
	raw, _ := json.Marshal(d)
	for i := 0; len(raw) < size; i++ {
		// Settings of up to 64 characters until the manifest is big enough.
		pad := size - len(raw) - len(`,{"name":"SETTING_00","value":""}`)
		env = append(env, map[string]string{"name": fmt.Sprintf("SETTING_%02d", i), "value": strings.Repeat("x", min(max(pad, 1), 64))})
		raw, _ = json.Marshal(d)
	}
	return raw
}

// ApplyStatus sets what an agent reports for w: Applied and Available, and
// status feedback.
func ApplyStatus(w *workv1.ManifestWork) {
	for _, c := range []string{workv1.WorkApplied, workv1.WorkAvailable} {
		meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{
			Type: c, Status: metav1.ConditionTrue, Reason: "AppliedManifestWorkComplete", ObservedGeneration: w.Generation,
		})
	}
	w.Status.ResourceStatus.Manifests = []workv1.ManifestCondition{{
		ResourceMeta: workv1.ManifestResourceMeta{Group: "apps", Version: "v1", Kind: "Deployment", Resource: "deployments", Name: w.Name, Namespace: "default"},
		StatusFeedbacks: workv1.StatusFeedbackResult{Values: []workv1.FeedbackValue{
			{Name: "replicas", Value: workv1.FieldValue{Type: workv1.Integer, Integer: ptr.To[int64](2)}},
			{Name: "readyReplicas", Value: workv1.FieldValue{Type: workv1.Integer, Integer: ptr.To[int64](2)}},
		}},
		Conditions: []metav1.Condition{{Type: workv1.ManifestApplied, Status: metav1.ConditionTrue, Reason: "AppliedManifestComplete", LastTransitionTime: metav1.Now()}},
	}}
}

// Applied reports whether w's status says Applied.
func Applied(w *workv1.ManifestWork) bool {
	return meta.IsStatusConditionTrue(w.Status.Conditions, workv1.WorkApplied)
}

// ReportApplied reports each work of cached Applied with write, as a work
// agent's controller does: from its lister's copy, and on a Conflict (the
// cache was behind) again from a fresh read of works.
func ReportApplied(ctx context.Context, works workv1client.ManifestWorkInterface, cached []*workv1.ManifestWork,
	write func(context.Context, *workv1.ManifestWork) error) error {
	for _, c := range cached {
		w := c.DeepCopy()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			ApplyStatus(w)
			err := write(ctx, w)
			if apierrors.IsConflict(err) {
				if w, err = works.Get(ctx, c.Name, metav1.GetOptions{}); err != nil {
					return err
				}
				return apierrors.NewConflict(workv1.Resource("manifestworks"), c.Name, errors.New("the cache was behind"))
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("report the status of %s: %w", c.Name, err)
		}
	}
	return nil
}

// Counter counts distinct names, for "every work has arrived", and keeps
// when each first arrived.
type Counter struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

// NewCounter returns a counter with room for n names, so that filling it
// does not count as the SDK's heap.
func NewCounter(n int) *Counter { return &Counter{seen: make(map[string]time.Time, n)} }

// Mark counts name, the first time.
func (c *Counter) Mark(name string) {
	now := time.Now()
	c.mu.Lock()
	if _, ok := c.seen[name]; !ok {
		c.seen[name] = now
	}
	c.mu.Unlock()
}

// Count is how many names were marked.
func (c *Counter) Count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

// Arrivals calls f with each name marked and when it first was.
func (c *Counter) Arrivals(f func(name string, at time.Time)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, at := range c.seen {
		f(name, at)
	}
}

// Wait prints progress on w until done() reaches total or ctx ends.
func Wait(ctx context.Context, w io.Writer, phase string, total int, done func() int) error {
	begin := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	lastPrint := time.Now()
	for {
		n := done()
		if time.Since(lastPrint) >= time.Second || n >= total {
			elapsed := time.Since(begin)
			fmt.Fprintf(w, "\r%-13s %8d/%d  %8.0f/s  %v   ", phase, n, total, float64(n)/max(elapsed.Seconds(), 1e-9), elapsed.Round(time.Second))
			lastPrint = time.Now()
		}
		if n >= total {
			fmt.Fprintln(w)
			return nil
		}
		select {
		case <-ctx.Done():
			fmt.Fprintln(w)
			return fmt.Errorf("%d of %d after %v: %w", n, total, time.Since(begin).Round(time.Millisecond), context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// PeakRSS is the process's high-water resident set in bytes (VmHWM, on
// Linux), 0 where it cannot be read.
func PeakRSS() int64 { return PeakRSSOf("self") }

// PeakRSSOf is PeakRSS of the process pid names ("self", or a number).
func PeakRSSOf(pid string) int64 {
	data, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// LiveHeap is the live heap in bytes, after a collection.
func LiveHeap() uint64 {
	goruntime.GC()
	var m goruntime.MemStats
	goruntime.ReadMemStats(&m)
	return m.HeapAlloc
}

// CPUProfile starts profiling the CPU into the file at path, if path is
// not empty; stop ends the profile and closes the file.
func CPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
