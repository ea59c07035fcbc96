package work_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubetypes "k8s.io/apimachinery/pkg/types"
	workv1client "open-cluster-management.io/api/client/work/clientset/versioned/typed/work/v1"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/memory"
	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/options/mqtt/mqtttest"
	"github.com/workwire/sdk-go/work"
)

// limitedTransport refuses events whose data and metadata exceed limit
// with options.ErrTooLarge, as a transport or broker with a packet limit
// does, and counts the refusals per resource.
type limitedTransport struct {
	options.Transport
	limit int

	mu      sync.Mutex
	refused map[string]int // resourceid → refusals
}

func newLimitedTransport(b *memory.Broker, limit int) *limitedTransport {
	return &limitedTransport{Transport: b.Transport(), limit: limit, refused: map[string]int{}}
}

func (t *limitedTransport) Send(ctx context.Context, route options.Route, evt *cloudevents.Event) error {
	meta, _ := evt.Extensions()[types.ExtMetadata].(string)
	if size := len(evt.Data()) + len(meta); size > t.limit {
		id, _ := evt.Extensions()[types.ExtResourceID].(string)
		t.mu.Lock()
		t.refused[id]++
		t.mu.Unlock()
		return fmt.Errorf("limited: event %s: %w: %d bytes, limit %d", evt.ID(), options.ErrTooLarge, size, t.limit)
	}
	return t.Transport.Send(ctx, route, evt)
}

func (t *limitedTransport) refusals(uid kubetypes.UID) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.refused[string(uid)]
}

// resyncCounter counts the resync requests a client answered.
type resyncCounter struct {
	generic.NopObserver
	n atomic.Int64
}

func (r *resyncCounter) ResyncAnswered(generic.Side, types.DataType, int) { r.n.Add(1) }

// sizedTransport is a limitedTransport that tells its limit.
type sizedTransport struct{ *limitedTransport }

var _ options.EventSizeLimiter = sizedTransport{}

func (t sizedTransport) MaxEventBytes() int { return t.limit }

// bigWork is a work whose one manifest is about size bytes.
func bigWork(name string, size int) *workv1.ManifestWork {
	return newWork(name, strings.Repeat("x", size), nil)
}

// errorLog records what reaches an error handler.
type errorLog struct {
	mu   sync.Mutex
	errs []error
	kvs  [][]any
}

func (l *errorLog) handle(_ context.Context, err error, _ string, kv ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, err)
	l.kvs = append(l.kvs, kv)
}

// find returns the first recorded error that match accepts, and its
// key-value pairs; nil if none.
func (l *errorLog) find(match func(err error, kv []any) bool) (kv []any, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, err := range l.errs {
		if match(err, l.kvs[i]) {
			return l.kvs[i], err
		}
	}
	return nil, nil
}

// A work too large for the transport fails at once, is reported once by
// name, and holds up none of the works behind it.
func TestOversizeWorkIsReportedNotRetried(t *testing.T) {
	t.Parallel()
	b := memory.NewBroker()
	tr := newLimitedTransport(b, 64<<10) // tells no limit: found out at Send
	var log errorLog
	resyncs := &resyncCounter{}
	hub := startHolder(t, hubBuilder(work.TransportFunc(func() (options.Transport, error) { return tr, nil }), "hub1").
		WithErrorHandler(log.handle).WithSourceOptions(generic.WithObserver(resyncs)))
	agent := startHolder(t, agentBuilder(memoryTransport(b), "cluster1"))
	ctx := context.Background()
	works := hub.WorkInterface().WorkV1().ManifestWorks("cluster1")
	// The agent's start-up resync is answered before the big work exists,
	// so only the publisher ever sends it (periodic resync is off).
	eventually(t, "the agent's start-up resync answered", func() bool { return resyncs.n.Load() > 0 })

	big, err := works.Create(ctx, bigWork("big", 100<<10), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a transport that tells no limit: Create: %v", err)
	}
	for i := range 5 {
		if _, err := works.Create(ctx, newWork(fmt.Sprint("small-", i), "1", nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the works behind the big one arrive", func() bool {
		list, err := agent.WorkInterface().WorkV1().ManifestWorks("cluster1").List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 5
	})
	var reported error
	var kv []any
	eventually(t, "the big work reported", func() bool {
		kv, reported = log.find(func(err error, _ []any) bool { return errors.Is(err, options.ErrTooLarge) })
		return reported != nil
	})
	// Reported after one attempt: not retried.
	if n := tr.refusals(big.UID); n != 1 {
		t.Errorf("the big work was sent %d times, want 1: a permanent error is not retried", n)
	}
	if !strings.Contains(reported.Error(), "cluster1/big") || !strings.Contains(fmt.Sprint(kv...), "cluster1/big") {
		t.Errorf("the report does not name the work: %v %v", reported, kv)
	}
	if _, again := log.find(func(err error, _ []any) bool {
		return errors.Is(err, options.ErrTooLarge) && err != reported
	}); again != nil {
		t.Error("the big work was reported twice")
	}
}

// Over a transport that tells its limit, a work larger than it is refused
// at the call with 413, and is not stored.
func TestOversizeWorkIsRefusedAtTheCall(t *testing.T) {
	t.Parallel()
	b := memory.NewBroker()
	tr := sizedTransport{newLimitedTransport(b, 64<<10)}
	hub := startHolder(t, hubBuilder(work.TransportFunc(func() (options.Transport, error) { return tr, nil }), "hub1"))
	ctx := context.Background()
	works := hub.WorkInterface().WorkV1().ManifestWorks("cluster1")

	for _, dry := range [][]string{{metav1.DryRunAll}, nil} {
		if _, err := works.Create(ctx, bigWork("big", 100<<10), metav1.CreateOptions{DryRun: dry}); !apierrors.IsRequestEntityTooLargeError(err) {
			t.Fatalf("Create of a work over the limit (dry run %v): %v, want 413", dry, err)
		}
	}
	if _, err := works.Get(ctx, "big", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a refused work was stored: %v", err)
	}
	small, err := works.Create(ctx, newWork("small", "1", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	grown := small.DeepCopy()
	grown.Spec.Workload.Manifests[0] = bigWork("small", 100<<10).Spec.Workload.Manifests[0]
	if _, err := works.Update(ctx, grown, metav1.UpdateOptions{}); !apierrors.IsRequestEntityTooLargeError(err) {
		t.Errorf("Update over the limit: %v, want 413", err)
	}
	if cur, _ := works.Get(ctx, "small", metav1.GetOptions{}); cur.Generation != 1 {
		t.Errorf("a refused update was stored: generation %d", cur.Generation)
	}
	// Near the limit is fine.
	if _, err := works.Create(ctx, bigWork("near", 60<<10), metav1.CreateOptions{}); err != nil {
		t.Errorf("Create under the limit: %v", err)
	}
}

// A work larger than a kube-apiserver stores (1.5 MiB, etcd's default
// request limit) is refused at the call with 413, naming both sizes and the
// setting that raises the limit, over a transport that would carry it: an
// MQTT broker that announces no limit, as Mosquitto by default. A work
// just under it is taken, and so is a larger one by a hub that raised it.
func TestAWorkLargerThanAKubeAPIServerStoresIsRefused(t *testing.T) {
	t.Parallel()
	b := mqtttest.NewBroker(t)
	hub := startHolder(t, hubBuilder(&mqtt.Config{BrokerHost: b.Addr()}, "hub1"))
	ctx := context.Background()
	works := hub.WorkInterface().WorkV1().ManifestWorks("cluster1")

	_, err := works.Create(ctx, bigWork("big", 5<<20), metav1.CreateOptions{})
	if !apierrors.IsRequestEntityTooLargeError(err) {
		t.Fatalf("Create of a 5 MiB work: %v, want 413", err)
	}
	var size int
	if _, scanErr := fmt.Sscanf(err.Error()[strings.Index(err.Error(), "its content alone is "):], "its content alone is %d bytes", &size); scanErr != nil || size < 5<<20 ||
		!strings.Contains(err.Error(), fmt.Sprintf("(%d bytes: ", work.DefaultMaxWorkBytes)) || !strings.Contains(err.Error(), "WithMaxWorkBytes") {
		t.Errorf("the refusal %q does not give the work's size, the limit and WithMaxWorkBytes", err)
	}
	if _, err := works.Get(ctx, "big", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a refused work was stored: %v", err)
	}
	near, err := works.Create(ctx, bigWork("near", work.DefaultMaxWorkBytes-1<<10), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("Create of a work just under the limit: %v", err)
	}
	grown := near.DeepCopy()
	grown.Spec.Workload.Manifests[0] = bigWork("near", 2<<20).Spec.Workload.Manifests[0]
	if _, err := works.Update(ctx, grown, metav1.UpdateOptions{}); !apierrors.IsRequestEntityTooLargeError(err) {
		t.Errorf("Update over the limit: %v, want 413", err)
	}

	raised := startHolder(t, hubBuilder(&mqtt.Config{BrokerHost: b.Addr()}, "hub2").WithMaxWorkBytes(8<<20))
	if _, err := raised.WorkInterface().WorkV1().ManifestWorks("cluster1").Create(ctx, bigWork("big", 5<<20), metav1.CreateOptions{}); err != nil {
		t.Errorf("Create of a 5 MiB work with WithMaxWorkBytes(8 MiB): %v", err)
	}
}

// statusCounter is a transport that counts the status events it sends.
type statusCounter struct {
	options.Transport
	n atomic.Int64
}

func (s *statusCounter) Send(ctx context.Context, r options.Route, evt *cloudevents.Event) error {
	if r.Role == options.RoleStatus {
		s.n.Add(1)
	}
	return s.Transport.Send(ctx, r, evt)
}

// WithStatusResend sends a work's status once more after the first status
// of each generation but the first, as the work then stands, and after its
// Deleted status; for no other status.
func TestStatusResendFollowsEachNewGeneration(t *testing.T) {
	t.Parallel()
	b := memory.NewBroker()
	hub := startHolder(t, hubBuilder(memoryTransport(b), "hub"))
	counter := &statusCounter{Transport: b.Transport()}
	agent := startHolder(t, agentBuilder(work.TransportFunc(func() (options.Transport, error) { return counter, nil }), "cluster1").
		WithStatusResend(20*time.Millisecond))
	hubWorks := hub.WorkInterface().WorkV1().ManifestWorks("cluster1")
	agentWorks := agent.WorkInterface().WorkV1().ManifestWorks("cluster1")
	ctx := context.Background()
	w := createAtAgent(t, hubWorks, agentWorks, "w")
	setStatus := func(w *workv1.ManifestWork, reason string) *workv1.ManifestWork {
		t.Helper()
		w = w.DeepCopy()
		meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: reason, ObservedGeneration: w.Generation})
		out, err := agentWorks.UpdateStatus(ctx, w, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	hubHas := func(reason string) func() bool {
		return func() bool {
			w, err := hubWorks.Get(ctx, "w", metav1.GetOptions{})
			c := meta.FindStatusCondition(w.Status.Conditions, workv1.WorkApplied)
			return err == nil && c != nil && c.Reason == reason
		}
	}
	// The first generation the agent holds: no resend.
	w = setStatus(w, "First")
	eventually(t, "the first status at the hub", hubHas("First"))
	w = setStatus(w, "Second")
	eventually(t, "the second status at the hub", hubHas("Second"))

	cur, err := hubWorks.Get(ctx, "w", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.Workload.Manifests = []workv1.Manifest{configMap("w", "v2")}
	if _, err := hubWorks.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "generation 2 at the agent", func() bool {
		w, err = agentWorks.Get(ctx, "w", metav1.GetOptions{})
		return err == nil && w.Generation == 2
	})
	setStatus(w, "Third")
	// The third status and its resend, which comes after everything before.
	eventually(t, "four status events", func() bool { return counter.n.Load() >= 4 })
	if n := counter.n.Load(); n != 4 {
		t.Errorf("%d status events, want 4: one for each of the first generation, two for the next", n)
	}
	eventually(t, "the hub holds the last status", hubHas("Third"))

	// The Deleted status, the work's last, goes twice too; the hub, which
	// forgot the work at the first, ignores the second.
	if err := hubWorks.Delete(ctx, "w", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Deleted status and its resend", func() bool { return counter.n.Load() >= 6 })
	if n := counter.n.Load(); n != 6 {
		t.Errorf("%d status events, want 6", n)
	}
	// Counted as the agent sends them: the hub takes them in its own time.
	eventually(t, "the hub forgets the deleted work", func() bool {
		_, err := hubWorks.Get(ctx, "w", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

// A status lost on its way to the hub is not lost for good: the hub, which
// no status acknowledged the work's spec for, sends the spec again, and the
// agent, holding that spec as it is, answers with the status it has.
func TestALostStatusIsSentAgainWhenTheSpecComesAgain(t *testing.T) {
	t.Parallel()
	b := memory.NewBroker()
	hub := startHolder(t, hubBuilder(memoryTransport(b), "hub").WithSourceOptions(generic.WithSpecResend(50*time.Millisecond)))
	agent := startHolder(t, agentBuilder(memoryTransport(b), "cluster1"))
	hubWorks := hub.WorkInterface().WorkV1().ManifestWorks("cluster1")
	agentWorks := agent.WorkInterface().WorkV1().ManifestWorks("cluster1")
	ctx := context.Background()
	w := createAtAgent(t, hubWorks, agentWorks, "w")

	b.SetFaults(memory.Faults{Drop: 1, Roles: []options.Role{options.RoleStatus}})
	meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: "Applied", ObservedGeneration: 1})
	if _, err := agentWorks.UpdateStatus(ctx, w, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the status lost", func() bool { return b.FaultStats().Dropped >= 1 })
	b.SetFaults(memory.Faults{})

	eventually(t, "the status at the hub", func() bool {
		w, err := hubWorks.Get(ctx, "w", metav1.GetOptions{})
		return err == nil && meta.IsStatusConditionTrue(w.Status.Conditions, workv1.WorkApplied)
	})
}

// createAtAgent creates work name on the hub and returns it once the agent
// holds it.
func createAtAgent(t *testing.T, hubWorks, agentWorks workv1client.ManifestWorkInterface, name string) *workv1.ManifestWork {
	t.Helper()
	ctx := context.Background()
	if _, err := hubWorks.Create(ctx, newWork(name, "v1", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var w *workv1.ManifestWork
	eventually(t, "the work at the agent", func() bool {
		var err error
		w, err = agentWorks.Get(ctx, name, metav1.GetOptions{})
		return err == nil
	})
	return w
}
