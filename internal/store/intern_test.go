package store

import (
	"fmt"
	"testing"

	workv1 "open-cluster-management.io/api/work/v1"
)

func TestStoredObjectsShareEqualLabelsAndAnnotations(t *testing.T) {
	t.Parallel()
	s := newStore(0)
	for _, name := range []string{"a", "b"} {
		w := work("c1", name, map[string]string{"app": "demo", "tier": "web"})
		w.Annotations = map[string]string{"source": "hub1"}
		if err := s.Put(w); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Put(work("c1", "c", map[string]string{"app": "other"})); err != nil {
		t.Fatal(err)
	}
	a, _ := s.Peek("c1", "a")
	b, _ := s.Peek("c1", "b")
	c, _ := s.Peek("c1", "c")
	if !sameMap(a.Labels, b.Labels) || !sameMap(a.Annotations, b.Annotations) {
		t.Error("two stored objects with equal labels and annotations do not share them")
	}
	if sameMap(a.Labels, c.Labels) || c.Labels["app"] != "other" {
		t.Errorf("different labels were shared: %v", c.Labels)
	}

	// What the store hands out is the caller's own.
	got, _ := s.Get("c1", "a")
	got.Labels["app"] = "changed"
	updated, err := s.Update("c1", "b", func(cur *workv1.ManifestWork) (*workv1.ManifestWork, error) {
		cur.Labels["tier"] = "db"
		return cur, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := s.Peek("c1", "a"); a.Labels["app"] != "demo" || a.Labels["tier"] != "web" {
		t.Errorf("a change to a copy reached a shared map: %v", a.Labels)
	}
	if updated.Labels["tier"] != "db" {
		t.Errorf("the update was lost: %v", updated.Labels)
	}
}

func TestTheInternerForgetsWhenFull(t *testing.T) {
	t.Parallel()
	in := newInterner()
	first := in.intern(map[string]string{"n": "0"})
	for i := 1; i < maxInterned; i++ {
		in.intern(map[string]string{"n": fmt.Sprint(i)})
	}
	if got := in.intern(map[string]string{"n": "0"}); !sameMap(got, first) {
		t.Fatal("forgot a map before it was full")
	}
	in.intern(map[string]string{"n": "full"})
	if len(in.maps) != 1 {
		t.Fatalf("remembers %d maps once full, want only the last", len(in.maps))
	}
	big := make(map[string]string, maxInternedEntries+1)
	for i := range maxInternedEntries + 1 {
		big[fmt.Sprint(i)] = "v"
	}
	in.intern(big)
	if len(in.maps) != 1 {
		t.Error("remembered a map larger than maxInternedEntries")
	}
	if got := in.intern(map[string]string{}); got == nil || len(in.maps) != 1 {
		t.Error("an empty map was interned or replaced by nil")
	}
}

// sameMap reports whether a and b are one map.
func sameMap(a, b map[string]string) bool {
	if a == nil || b == nil {
		return false
	}
	a["\x00probe"] = ""
	_, shared := b["\x00probe"]
	delete(a, "\x00probe")
	return shared
}
