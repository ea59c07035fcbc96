package main

import (
	"fmt"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	workv1 "open-cluster-management.io/api/work/v1"
)

// tally counts a hub's works, and those not Applied at their generation,
// as they change: the harness asks ten times a second, and counting
// 300,000 works each time took a third of the hub's CPU.
type tally struct {
	mu      sync.Mutex
	held    map[string]struct{}             // namespace/name
	waiting map[string]*workv1.ManifestWork // of them, not Applied at their generation
}

func newTally() *tally {
	return &tally{held: make(map[string]struct{}), waiting: make(map[string]*workv1.ManifestWork)}
}

// set counts w as it is now.
func (t *tally) set(w *workv1.ManifestWork) {
	key := w.Namespace + "/" + w.Name
	t.mu.Lock()
	defer t.mu.Unlock()
	t.held[key] = struct{}{}
	if appliedAt(w) {
		delete(t.waiting, key)
	} else {
		t.waiting[key] = w
	}
}

// remove forgets the work namespace/name.
func (t *tally) remove(namespace, name string) {
	key := namespace + "/" + name
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.held, key)
	delete(t.waiting, key)
}

// counts returns the works held, those Applied, and, when no more than
// waitingNames wait, their names.
func (t *tally) counts() (held, applied int, waiting []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.waiting) <= waitingNames {
		for _, w := range t.waiting {
			waiting = append(waiting, fmt.Sprintf("%s/%s (generation %d, uid %s)", w.Namespace, w.Name, w.Generation, w.UID))
		}
		slices.Sort(waiting)
	}
	return len(t.held), len(t.held) - len(t.waiting), waiting
}

func appliedAt(w *workv1.ManifestWork) bool {
	c := meta.FindStatusCondition(w.Status.Conditions, workv1.WorkApplied)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == w.Generation
}
