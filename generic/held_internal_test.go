package generic

import (
	"testing"
	"time"

	"github.com/workwire/sdk-go/generic/types"
)

// A spec resync of one data type rebuilds only that data type's entries:
// what the Lister no longer lists goes, what was set while it listed stays,
// a listed entry keeps the source the index knew, and the other data
// types' entries are left alone.
func TestARebuildReplacesOnlyItsDataType(t *testing.T) {
	works := types.DataType{Group: "io.example", Version: "v1", Resource: "works"}
	leases := types.DataType{Group: "io.example", Version: "v1", Resource: "leases"}
	h := heldIndex{m: map[string]heldEntry{}}
	h.set("gone", newHeldEntry(1, "hub", works))
	h.set("kept", newHeldEntry(2, "hub", works))
	h.set("lease", newHeldEntry(3, "hub", leases))

	epoch := h.beginRebuild()
	h.set("new", newHeldEntry(4, "hub", works)) // arrives while listing
	h.finishRebuild(epoch, works, map[string]heldEntry{"kept": newHeldEntry(2, "", works)})

	if _, ok := h.get("gone"); ok {
		t.Error("an entry the Lister no longer lists survived the rebuild")
	}
	for id, want := range map[string]int64{"kept": 2, "new": 4, "lease": 3} {
		e, ok := h.get(id)
		if !ok || e.version != want || e.owner() != "hub" {
			t.Errorf("%s: got %+v (held %v), want version %d of hub", id, e, ok, want)
		}
	}
	if e, _ := h.get("kept"); e.origin.Value().dataType != works {
		t.Errorf("kept changed data type: %v", e.origin.Value().dataType)
	}
	if e, _ := h.get("lease"); e.origin.Value().dataType != leases {
		t.Errorf("lease changed data type: %v", e.origin.Value().dataType)
	}
}

// A handler that fails leaves the index as it was before the event.
func TestRestoreUndoesASet(t *testing.T) {
	works := types.DataType{Group: "io.example", Version: "v1", Resource: "works"}
	h := heldIndex{m: map[string]heldEntry{}}
	h.set("w", newHeldEntry(1, "hub", works))
	prev, held := h.get("w")
	h.set("w", newHeldEntry(2, "hub", works))
	h.restore("w", prev, held)
	if e, _ := h.get("w"); e.version != 1 {
		t.Errorf("restored version %d, want 1", e.version)
	}
	prev, held = h.get("fresh")
	h.set("fresh", newHeldEntry(1, "", works))
	h.restore("fresh", prev, held)
	if _, ok := h.get("fresh"); ok {
		t.Error("a restored entry that was not held is still held")
	}
}

// A deletion is remembered for deletionMemory, whatever rebuilds happen,
// and forgotten after it.
func TestADeletionIsRememberedForAWhile(t *testing.T) {
	works := types.DataType{Group: "io.example", Version: "v1", Resource: "works"}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	h := heldIndex{m: map[string]heldEntry{}, clock: func() time.Time { return now }}
	h.set("w", newHeldEntry(3, "hub", works))
	h.bury("w", 3)
	h.finishRebuild(h.beginRebuild(), works, map[string]heldEntry{})
	now = now.Add(deletionMemory - time.Second)
	if _, _, v, ok := h.lookup("w"); !ok || v != 3 {
		t.Errorf("before deletionMemory: buried %d, %v; want 3, true", v, ok)
	}
	now = now.Add(time.Second)
	if _, _, _, ok := h.lookup("w"); ok {
		t.Error("still buried after deletionMemory")
	}
	h.bury("later", 1)
	if _, kept := h.gone["w"]; kept {
		t.Error("an expired deletion was not pruned")
	}
	if _, _, _, ok := h.lookup("later"); !ok {
		t.Error("a fresh deletion is not buried")
	}
}
