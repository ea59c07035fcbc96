package resync

import (
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/workwire/sdk-go/generic/types"
)

// FuzzBatchOf feeds BatchOf the resync batch extensions as the MQTT
// binding delivers them (strings, or absent), and checks that what it
// accepts is a batch inside its request.
func FuzzBatchOf(f *testing.F) {
	f.Add("r1", "0", "1", true, true)
	f.Add("r1", "2", "3", true, true)
	f.Add("r1", "3", "3", true, true)
	f.Add("", "", "", false, false)
	f.Add("r1", "-1", "99999999999", true, true)
	f.Add("r1", "1", "", true, false)
	f.Fuzz(func(t *testing.T, id, index, total string, hasIndex, hasTotal bool) {
		evt := cloudevents.New()
		evt.SetID("e1")
		if id != "" {
			evt.SetExtension(types.ExtResyncID, id)
		}
		if hasIndex {
			evt.SetExtension(types.ExtResyncBatch, index)
		}
		if hasTotal {
			evt.SetExtension(types.ExtResyncBatches, total)
		}
		gotID, i, n, err := BatchOf(&evt)
		if err != nil {
			return
		}
		if gotID == "" || n < 1 || n > 1<<20 || i < 0 || i >= n {
			t.Fatalf("BatchOf(%q, %q, %q) = %q, batch %d of %d", id, index, total, gotID, i, n)
		}
	})
}
