package work_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	workv1 "open-cluster-management.io/api/work/v1"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/workwire/sdk-go/options/memory"
)

// A hub controller's Create, its send, the agent's handling of the spec,
// the agent's status (written by a controller that does not trace) and the
// hub's handling of that status form one trace, carried across the broker
// in the CloudEvents tracing extension.
func TestOneTraceFromCreateToTheHubsStatus(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	b := memory.NewBroker()
	hub := startHolder(t, hubBuilder(memoryTransport(b), "hub1").WithTracerProvider(tp))
	agent := agentBuilder(memoryTransport(b), "cluster1").WithTracerProvider(tp)
	agentHolder := startHolder(t, agent)

	// The agent's controller reports what arrives Applied, with a context
	// of its own: no span.
	works := agentHolder.WorkInterface().WorkV1().ManifestWorks("cluster1")
	apply := func(obj any) {
		w := obj.(*workv1.ManifestWork)
		if meta.IsStatusConditionTrue(w.Status.Conditions, workv1.WorkApplied) {
			return
		}
		w = w.DeepCopy()
		meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: "Applied"})
		_, _ = works.UpdateStatus(context.Background(), w, metav1.UpdateOptions{})
	}
	if _, err := agentHolder.ManifestWorkInformer().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: apply, UpdateFunc: func(_, obj any) { apply(obj) },
	}); err != nil {
		t.Fatal(err)
	}

	ctx, reconcile := tp.Tracer("hub-controller").Start(context.Background(), "reconcile")
	if _, err := hub.WorkInterface().WorkV1().ManifestWorks("cluster1").Create(ctx, newWork("web", "v1", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	reconcile.End()

	// The chain from the hub's handling of the status up to the reconcile.
	want := []string{
		"process status.update_request", "send status.update_request", "update status ManifestWork",
		"process spec.create_request", "send spec.create_request", "create ManifestWork", "reconcile",
	}
	var longest []string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		ended := spans.Ended()
		byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
		for _, s := range ended {
			byID[s.SpanContext().SpanID()] = s
		}
		for _, s := range ended {
			if s.Name() != want[0] {
				continue
			}
			var chain []string
			for cur, ok := s, true; ok && cur.SpanContext().TraceID() == reconcile.SpanContext().TraceID(); cur, ok = byID[cur.Parent().SpanID()] {
				chain = append(chain, cur.Name())
			}
			if slices.Equal(chain, want) {
				return
			}
			if len(chain) > len(longest) {
				longest = chain
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no trace from the reconcile to the hub's handling of the status; the longest chain in it:\n%s", strings.Join(longest, " <- "))
		}
	}
}
