package store

import (
	"fmt"
	"slices"
	"testing"

	workv1 "open-cluster-management.io/api/work/v1"
)

func TestAFeedHasTheObjectsThenEveryChangeOfItsNamespace(t *testing.T) {
	t.Parallel()
	s := newStore(0)
	for _, w := range []*workv1.ManifestWork{work("c1", "a", nil), work("c2", "b", nil)} {
		if err := s.Put(w); err != nil {
			t.Fatal(err)
		}
	}
	f := s.Subscribe("c1")
	if _, err := s.Update("c1", "a", func(cur *workv1.ManifestWork) (*workv1.ManifestWork, error) {
		cur.Labels = map[string]string{"x": "1"}
		return cur, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(work("c2", "c", nil)); err != nil { // not c1's
		t.Fatal(err)
	}
	f.Replay()
	if _, err := s.Remove("c1", "a", nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-f.Ready():
	default:
		t.Fatal("Ready has no value with changes queued")
	}
	var got []string
	for _, c := range f.Take(nil) {
		prev := ""
		if c.Prev != nil {
			prev = " from " + c.Prev.ResourceVersion
		}
		got = append(got, fmt.Sprintf("%s %s at %s%s initial=%v", c.Type, c.Object.Name, c.Object.ResourceVersion, prev, c.Initial))
	}
	want := []string{
		"ADDED a at 1 initial=true",
		"MODIFIED a at 3 from 1 initial=false",
		"MODIFIED a at 3 from 3 initial=false", // the replay
		"DELETED a at 5 initial=false",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	f.Close()
	f.Close()
	if err := s.Put(work("c1", "d", nil)); err != nil {
		t.Fatal(err)
	}
	if cs := f.Take(nil); len(cs) != 0 {
		t.Fatalf("a closed feed got %v", cs)
	}
}
