package manifests_test

import (
	"testing"

	"github.com/workwire/sdk-go/internal/manifests"
	"github.com/workwire/sdk-go/internal/testsupport/benchworks"
)

// A hub holder checks every work it is given: the bench's work, one 2 KB
// manifest.
func BenchmarkCheck(b *testing.B) {
	w := benchworks.Works(1, 1, 2048)[0]
	b.SetBytes(int64(len(w.Spec.Workload.Manifests[0].Raw)))
	b.ReportAllocs()
	for b.Loop() {
		if errs := manifests.Check(w); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
}
