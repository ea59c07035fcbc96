package work_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/options/memory"
	"github.com/workwire/sdk-go/resource/agentstate"
	"github.com/workwire/sdk-go/work"
)

// agentProcess is one run of an agent: its holder over a state, and its
// controller applying to a cluster that outlives it.
type agentProcess struct {
	holder *work.ClientHolder
	cancel context.CancelFunc
	wg     *sync.WaitGroup
}

func startAgentProcess(t *testing.T, b *memory.Broker, state agentstate.Store, cluster *appliedSet) *agentProcess {
	t.Helper()
	h, err := agentBuilder(memoryTransport(b), "cluster1").WithAgentState(state).WithLogger(logr.Discard()).NewClientHolder()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &agentProcess{holder: h, cancel: cancel, wg: runAgentControllerOn(ctx, t, h, "cluster1", cluster)}
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.kill)
	return p
}

// kill ends the process as a crash would for what it keeps: its holder
// closes without a word to anyone, and nothing is cleaned up.
func (p *agentProcess) kill() {
	p.cancel()
	p.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_ = p.holder.Close(ctx)
}

// forgotten records, for each work the hub's informer sees go, whether the
// cluster still had it then.
type forgotten struct {
	mu       sync.Mutex
	names    map[string]bool
	tooEarly []string
}

func watchForgotten(t *testing.T, hub *work.ClientHolder, cluster *appliedSet) *forgotten {
	f := &forgotten{names: make(map[string]bool)}
	_, err := hub.ManifestWorkInformer().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			w := obj.(*workv1.ManifestWork)
			f.mu.Lock()
			defer f.mu.Unlock()
			f.names[w.Name] = true
			if cluster.has(w.Name) {
				f.tooEarly = append(f.tooEarly, w.Name)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *forgotten) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.names)
}

// An agent whose process dies while its hub deletes works finds them again
// when it starts over the same state: its controllers see every deletion
// and clean up, and only then does the hub forget each work. The state is
// what makes it: without one, the new agent confirms the deletes at once.
func TestARestartedAgentCleansUpWhatWasDeletedWhileItWasDown(t *testing.T) {
	const works, deleted = 50, 30
	b := memory.NewBroker()
	hub := startHolder(t, hubBuilder(memoryTransport(b), "hub1"))
	hubWorks := hub.WorkInterface().WorkV1().ManifestWorks("cluster1")
	cluster := newAppliedSet()
	state := agentstate.NewMemory()
	agent := startAgentProcess(t, b, state, cluster)

	ctx := context.Background()
	for i := range works {
		if _, err := hubWorks.Create(ctx, newWork(fmt.Sprintf("w%02d", i), "v1", nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	lister := hub.ManifestWorkInformer().Lister().ManifestWorks("cluster1")
	eventually(t, "every work applied on the cluster and Applied on the hub", func() bool {
		for i := range works {
			if !appliedAt(lister, fmt.Sprintf("w%02d", i)) {
				return false
			}
		}
		return cluster.len() == works
	})
	if n := len(state.Names()); n != works {
		t.Fatalf("the agent's state holds %d works, want %d", n, works)
	}

	agent.kill()
	gone := watchForgotten(t, hub, cluster)
	for i := range deleted {
		if err := hubWorks.Delete(ctx, fmt.Sprintf("w%02d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := gone.count(); n != 0 {
		t.Fatalf("with no agent running, the hub forgot %d deleted works", n)
	}

	startAgentProcess(t, b, state, cluster)
	eventually(t, "the hub to forget every deleted work", func() bool { return gone.count() == deleted })
	gone.mu.Lock()
	tooEarly := gone.tooEarly
	gone.mu.Unlock()
	if len(tooEarly) > 0 {
		t.Errorf("the hub forgot %d works while their manifests were still on the cluster: %v", len(tooEarly), tooEarly)
	}
	for i := range works {
		name := fmt.Sprintf("w%02d", i)
		if want := i >= deleted; cluster.has(name) != want {
			t.Errorf("work %s on the cluster: %v, want %v", name, cluster.has(name), want)
		}
	}
	eventually(t, "the state to hold the kept works alone", func() bool { return len(state.Names()) == works-deleted })
}

// A hub that restarted with an in-memory store, and whose controllers made
// again only the works they keep, no longer knows the others: when the
// agent comes back, its resync names them, the hub answers that they are
// orphans, and the agent's controllers clean them up as deletions.
func TestARestartedAgentCleansUpWhatTheHubNoLongerKnows(t *testing.T) {
	const works, kept = 50, 20
	b := memory.NewBroker()
	hub := startHolder(t, hubBuilder(memoryTransport(b), "hub1"))
	cluster := newAppliedSet()
	state := agentstate.NewMemory()
	agent := startAgentProcess(t, b, state, cluster)

	ctx := context.Background()
	create := func(h *work.ClientHolder, n int) {
		for i := range n {
			if _, err := h.WorkInterface().WorkV1().ManifestWorks("cluster1").Create(ctx, newWork(fmt.Sprintf("w%02d", i), "v1", nil), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	create(hub, works)
	eventually(t, "every work applied", func() bool { return cluster.len() == works })

	agent.kill()
	closeHolder(t, hub)
	// No grace for orphans: the hub's controllers made their works before
	// the agent comes back.
	hub2 := startHolder(t, hubBuilder(memoryTransport(b), "hub1").WithSourceOptions(generic.WithOrphanGracePeriod(0)))
	create(hub2, kept)

	startAgentProcess(t, b, state, cluster)
	lister := hub2.ManifestWorkInformer().Lister().ManifestWorks("cluster1")
	eventually(t, "the cluster to hold the kept works alone, each Applied on the hub", func() bool {
		for i := range kept {
			if !appliedAt(lister, fmt.Sprintf("w%02d", i)) {
				return false
			}
		}
		return cluster.len() == kept
	})
	for i := range kept {
		if name := fmt.Sprintf("w%02d", i); !cluster.has(name) {
			t.Errorf("kept work %s is not on the cluster", name)
		}
	}
	eventually(t, "the state to hold the kept works alone", func() bool { return len(state.Names()) == kept })
}

// While specs keep coming and the agent's controller keeps writing, the
// state holds each work as the agent's store does: every write is kept in
// the state in the order the store takes it.
func TestTheAgentStateFollowsTheStore(t *testing.T) {
	b := memory.NewBroker()
	hub := startHolder(t, hubBuilder(memoryTransport(b), "hub1"))
	hubWorks := hub.WorkInterface().WorkV1().ManifestWorks("cluster1")
	state := agentstate.NewMemory()
	agent := startAgentProcess(t, b, state, newAppliedSet())

	ctx := context.Background()
	const works, updates = 10, 20
	for i := range works {
		if _, err := hubWorks.Create(ctx, newWork(fmt.Sprintf("w%d", i), "v0", nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for u := 1; u <= updates; u++ {
		for i := range works {
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error { // statuses come in meanwhile
				w, err := hubWorks.Get(ctx, fmt.Sprintf("w%d", i), metav1.GetOptions{})
				if err != nil {
					return err
				}
				w.Spec.Workload.Manifests = []workv1.Manifest{configMap(w.Name, fmt.Sprintf("v%d", u))}
				_, err = hubWorks.Update(ctx, w, metav1.UpdateOptions{})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	lister := hub.ManifestWorkInformer().Lister().ManifestWorks("cluster1")
	eventually(t, "every work's last generation Applied", func() bool {
		for i := range works {
			if !appliedAt(lister, fmt.Sprintf("w%d", i)) {
				return false
			}
		}
		return true
	})
	agentLister := agent.holder.ManifestWorkInformer().Lister().ManifestWorks("cluster1")
	entries, err := state.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range works {
		name := fmt.Sprintf("w%d", i)
		held, err := agentLister.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Object *workv1.ManifestWork `json:"object"`
		}
		if err := json.Unmarshal(entries[name], &r); err != nil || r.Object == nil {
			t.Fatalf("state entry of %s: %v", name, err)
		}
		kept := r.Object
		kept.ResourceVersion = held.ResourceVersion // the store's own
		// Times in JSON have seconds alone: compare what JSON keeps.
		data, err := json.Marshal(held)
		if err != nil {
			t.Fatal(err)
		}
		var want workv1.ManifestWork
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(&want, kept); diff != "" {
			t.Errorf("work %s in the state differs from the store (-store +state):\n%s", name, diff)
		}
	}
}

// A state the holder cannot read fails its Start, saying which entry: the
// agent would otherwise confirm deletes of what it held.
func TestAnUnreadableAgentStateFailsStart(t *testing.T) {
	b := memory.NewBroker()
	state := agentstate.NewMemory()
	if err := state.Put(context.Background(), "web", []byte(`{"object": 42}`)); err != nil {
		t.Fatal(err)
	}
	h, err := agentBuilder(memoryTransport(b), "cluster1").WithAgentState(state).WithLogger(logr.Discard()).NewClientHolder()
	if err != nil {
		t.Fatal(err)
	}
	defer closeHolder(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = h.Start(ctx)
	if err == nil || !strings.Contains(err.Error(), `entry "web"`) {
		t.Fatalf("Start over an unreadable state: %v, want an error naming the entry", err)
	}

	// A state is an agent's.
	if _, err := hubBuilder(memoryTransport(b), "hub1").WithAgentState(state).NewClientHolder(); err == nil {
		t.Error("a hub holder took an agent state")
	}
}
