package nats_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/nats"
	"github.com/workwire/sdk-go/options/nats/natstest"
	"github.com/workwire/sdk-go/options/transporttest"
	"github.com/workwire/sdk-go/work"
)

// deafBound is the delivery check's bound here: short, so the test takes
// seconds (generic's own tests show the bound kept in virtual time).
const deafBound = 3 * time.Second

// A hub's, and separately an agent's, subscription made deaf by a proxy
// that keeps the connection (pings and the replies to the client's
// requests pass; deliveries do not): Healthy says so, the transport
// connects again, and what the deaf side missed arrives — status updates
// of works already Applied, spec updates.
func TestADeafSubscriptionIsFoundAndHealed(t *testing.T) {
	for _, deaf := range []string{"hub", "agent"} {
		t.Run(deaf, func(t *testing.T) {
			s := natstest.NewServer(t)
			cfg := isolated(t, s.URL())
			through := func() (*transporttest.Proxy, work.TransportFunc) {
				p, err := transporttest.NewProtocolProxy(transporttest.NATS, strings.TrimPrefix(s.URL(), "nats://"))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = p.Close() })
				c := cfg
				c.URL = "nats://" + p.Addr()
				return p, func() (options.Transport, error) { return nats.New(c, nats.WithLogger(logr.Discard())) }
			}
			check := generic.WithDeliveryCheck(deafBound)
			hubProxy, hubTransport := through()
			agentProxy, agentTransport := through()
			agent := startHolder(t, work.NewClientHolderBuilder(agentTransport).WithClusterName("cluster1").WithAgentOptions(check))
			runAgent(t, agent)
			hub := startHolder(t, work.NewClientHolderBuilder(hubTransport).WithSourceID("hub1").WithSourceOptions(check))

			ctx := context.Background()
			hubWorks := hub.WorkInterface().WorkV1().ManifestWorks("cluster1")
			const n = 10
			for i := range n {
				if _, err := hubWorks.Create(ctx, configMapWork(fmt.Sprint("w", i), "v1"), metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			lister := hub.ManifestWorkInformer().Lister().ManifestWorks("cluster1")
			everyWork := func(cond func(*workv1.ManifestWork) bool) func() bool {
				return func() bool {
					for i := range n {
						w, err := lister.Get(fmt.Sprint("w", i))
						if err != nil || !cond(w) {
							return false
						}
					}
					return true
				}
			}
			appliedAt := func(gen int64) func(*workv1.ManifestWork) bool {
				return func(w *workv1.ManifestWork) bool {
					c := meta.FindStatusCondition(w.Status.Conditions, workv1.WorkApplied)
					return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == gen && w.Generation == gen
				}
			}
			eventually(t, "every work Applied", everyWork(appliedAt(1)))

			began := time.Now()
			var healthy func() error
			var healed func() bool
			if deaf == "hub" {
				hubProxy.Deafen()
				healthy = hub.Healthy
				agentWorks := agent.WorkInterface().WorkV1().ManifestWorks("cluster1")
				for i := range n {
					w, err := agentWorks.Get(ctx, fmt.Sprint("w", i), metav1.GetOptions{})
					if err != nil {
						t.Fatal(err)
					}
					meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: workv1.WorkAvailable, Status: metav1.ConditionTrue,
						Reason: "Available", ObservedGeneration: w.Generation})
					if _, err := agentWorks.UpdateStatus(ctx, w, metav1.UpdateOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				healed = everyWork(func(w *workv1.ManifestWork) bool {
					return meta.IsStatusConditionTrue(w.Status.Conditions, workv1.WorkAvailable)
				})
			} else {
				agentProxy.Deafen()
				healthy = agent.Healthy
				for i := range n {
					w, err := hubWorks.Get(ctx, fmt.Sprint("w", i), metav1.GetOptions{})
					if err != nil {
						t.Fatal(err)
					}
					w.Spec.Workload.Manifests = configMapWork(w.Name, "v2").Spec.Workload.Manifests
					if _, err := hubWorks.Update(ctx, w, metav1.UpdateOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				healed = everyWork(appliedAt(2))
			}
			eventually(t, "Healthy to say the subscription is deaf", func() bool { return errors.Is(healthy(), options.ErrDeaf) })
			found := time.Since(began)
			eventually(t, "what the deaf subscription missed to arrive", healed)
			arrived := time.Since(began)
			eventually(t, "Healthy again", func() bool { return healthy() == nil })
			if hubProxy.Deafened()+agentProxy.Deafened() == 0 {
				t.Error("the proxy dropped nothing: the subscription was never deaf")
			}
			t.Logf("deaf %s: found after %v, what it missed arrived after %v (bound %v)", deaf,
				found.Round(10*time.Millisecond), arrived.Round(10*time.Millisecond), deafBound)
		})
	}
}

func configMapWork(name, value string) *workv1.ManifestWork {
	return &workv1.ManifestWork{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: workv1.ManifestWorkSpec{Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{{RawExtension: runtime.RawExtension{
			Raw: fmt.Appendf(nil, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":"default"},"data":{"v":%q}}`, name, value),
		}}}}},
	}
}

func startHolder(t *testing.T, b *work.ClientHolderBuilder) *work.ClientHolder {
	t.Helper()
	h, err := b.WithLogger(logr.Discard()).NewClientHolder()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := h.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return h
}

// runAgent reports every generation of every work Applied, on the
// informer's goroutine (a conflict means a newer spec came: its update
// follows, and is reported then).
func runAgent(t *testing.T, h *work.ClientHolder) {
	works := h.WorkInterface().WorkV1().ManifestWorks("cluster1")
	report := func(obj any) {
		w := obj.(*workv1.ManifestWork)
		if c := meta.FindStatusCondition(w.Status.Conditions, workv1.WorkApplied); c != nil && c.ObservedGeneration == w.Generation {
			return
		}
		w = w.DeepCopy()
		meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: workv1.WorkApplied, Status: metav1.ConditionTrue,
			Reason: "Applied", ObservedGeneration: w.Generation})
		_, _ = works.UpdateStatus(context.Background(), w, metav1.UpdateOptions{})
	}
	if _, err := h.ManifestWorkInformer().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: report, UpdateFunc: func(_, obj any) { report(obj) },
	}); err != nil {
		t.Fatal(err)
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
