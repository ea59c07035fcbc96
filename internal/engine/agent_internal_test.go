package engine

import (
	"maps"
	"testing"
)

// The keys a source set before come recorded (joined) or from the stored
// object's maps; either way the merge drops those the source no longer
// sends and keeps the agent's own.
func TestMergeSourceKeys(t *testing.T) {
	cur := map[string]string{"agent": "x", "change": "local", "drop": "1", "keep": "1"}
	source := map[string]string{"keep": "1", "change": "2", "new": "1"}
	want := map[string]string{"agent": "x", "change": "2", "keep": "1", "new": "1"}
	recorded := joinKeys(map[string]string{"change": "1", "drop": "1", "keep": "1"})
	got, changed := mergeSourceKeys(cur, source, splitKeys(recorded))
	if !changed || !maps.Equal(got, want) {
		t.Errorf("with the recorded keys: got %v (changed %v), want %v", got, changed, want)
	}

	stored := map[string]string{"change": "1", "drop": "1", "keep": "1"}
	want = map[string]string{"change": "2", "keep": "1", "new": "1"}
	got, changed = mergeSourceKeys(stored, source, maps.Keys(stored))
	if !changed || !maps.Equal(got, want) {
		t.Errorf("with the stored object's keys: got %v (changed %v), want %v", got, changed, want)
	}
	if len(stored) != 3 {
		t.Errorf("the stored map was changed: %v", stored)
	}
}
