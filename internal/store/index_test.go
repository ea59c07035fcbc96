package store

import (
	"slices"
	"testing"

	workv1 "open-cluster-management.io/api/work/v1"
)

func TestIndexesFollowWrites(t *testing.T) {
	t.Parallel()
	s := newStore(0)
	if err := s.Put(work("c1", "a", map[string]string{"app": "x"})); err != nil {
		t.Fatal(err)
	}
	byApp := func(w *workv1.ManifestWork) ([]string, error) { return []string{w.Labels["app"]}, nil }
	if err := s.AddIndexes(map[string]IndexFunc[*workv1.ManifestWork]{"app": byApp}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddIndexes(map[string]IndexFunc[*workv1.ManifestWork]{"app": byApp}); err == nil {
		t.Fatal("an index added twice")
	}
	if err := s.Put(work("c2", "b", map[string]string{"app": "x"})); err != nil {
		t.Fatal(err)
	}
	keys := func(value string) []string {
		objs, err := s.ByIndex("app", value)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, w := range objs {
			out = append(out, Key(w))
		}
		slices.Sort(out)
		return out
	}
	if got := keys("x"); !slices.Equal(got, []string{"c1/a", "c2/b"}) {
		t.Fatalf("app=x: %q", got)
	}
	if err := s.Modify("c1", "a", func(cur *workv1.ManifestWork) (*workv1.ManifestWork, error) {
		cur.Labels = map[string]string{"app": "y"}
		return cur, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Remove("c2", "b", nil); err != nil {
		t.Fatal(err)
	}
	if got := keys("x"); len(got) != 0 {
		t.Fatalf("app=x after the writes: %q", got)
	}
	if got := keys("y"); !slices.Equal(got, []string{"c1/a"}) {
		t.Fatalf("app=y: %q", got)
	}
	if got := s.IndexValues("app"); !slices.Equal(got, []string{"y"}) {
		t.Fatalf("values: %q", got)
	}
	if _, err := s.ByIndex("nope", "x"); err == nil {
		t.Fatal("an unknown index: no error")
	}
}
