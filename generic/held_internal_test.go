package generic

import (
	"testing"
	"unique"

	"github.com/workwire/sdk-go/generic/types"
)

// A spec resync of one data type rebuilds only that data type's entries:
// what the Lister no longer lists goes, what was set while it listed stays,
// a listed entry keeps the source the index knew, and the other data
// types' entries are left alone.
func TestARebuildReplacesOnlyItsDataType(t *testing.T) {
	works := unique.Make(types.DataType{Group: "io.example", Version: "v1", Resource: "works"})
	leases := unique.Make(types.DataType{Group: "io.example", Version: "v1", Resource: "leases"})
	hub := unique.Make("hub")
	h := heldIndex{m: map[string]heldEntry{}}
	h.set("gone", heldEntry{version: 1, source: hub, dataType: works})
	h.set("kept", heldEntry{version: 2, source: hub, dataType: works})
	h.set("lease", heldEntry{version: 3, source: hub, dataType: leases})

	epoch := h.beginRebuild()
	h.set("new", heldEntry{version: 4, source: hub, dataType: works}) // arrives while listing
	h.finishRebuild(epoch, works, map[string]heldEntry{"kept": {version: 2, dataType: works}})

	if _, ok := h.get("gone"); ok {
		t.Error("an entry the Lister no longer lists survived the rebuild")
	}
	for id, want := range map[string]int64{"kept": 2, "new": 4, "lease": 3} {
		e, ok := h.get(id)
		if !ok || e.version != want || e.owner() != "hub" {
			t.Errorf("%s: got %+v (held %v), want version %d of hub", id, e, ok, want)
		}
	}
	if e, _ := h.get("lease"); e.dataType != leases {
		t.Errorf("lease changed data type: %v", e.dataType.Value())
	}
}

// A handler that fails leaves the index as it was before the event.
func TestRestoreUndoesASet(t *testing.T) {
	h := heldIndex{m: map[string]heldEntry{}}
	before := heldEntry{version: 1, source: unique.Make("hub")}
	h.set("w", before)
	prev, held := h.get("w")
	h.set("w", heldEntry{version: 2, source: unique.Make("hub")})
	h.restore("w", prev, held)
	if e, _ := h.get("w"); e.version != 1 {
		t.Errorf("restored version %d, want 1", e.version)
	}
	prev, held = h.get("fresh")
	h.set("fresh", heldEntry{version: 1})
	h.restore("fresh", prev, held)
	if _, ok := h.get("fresh"); ok {
		t.Error("a restored entry that was not held is still held")
	}
}
