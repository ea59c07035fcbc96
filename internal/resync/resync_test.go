package resync

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workwire/sdk-go/generic/types"
)

func TestSpec(t *testing.T) {
	own := Orphans{Source: "hub1"}
	entry := func(version int64, source string) types.ResourceVersion {
		return types.ResourceVersion{ResourceID: "r1", ResourceVersion: version, OriginalSource: source}
	}
	tests := []struct {
		name        string
		held        Held
		ok          bool
		e           types.ResourceVersion
		eventSource string
		o           Orphans
		want        Verdict
	}{
		{"the source holds newer", Held{Version: 3}, true, entry(2, ""), "", own, Send},
		{"the agent holds the same", Held{Version: 3}, true, entry(3, ""), "", own, Skip},
		{"the source is deleting it", Held{Version: 3, Deleting: true}, true, entry(3, ""), "", own, Send},
		{"the agent holds newer", Held{Version: 3}, true, entry(4, ""), "", own, AgentAhead},
		{"the agent holds newer of one being deleted", Held{Version: 3, Deleting: true}, true, entry(4, ""), "", own, Send},
		{"an orphan the event attributes to us", Held{}, false, entry(1, ""), "hub1", own, DeleteOrphan},
		{"an orphan the entry attributes to us", Held{}, false, entry(1, "hub1"), "hub2", own, DeleteOrphan},
		{"another source's", Held{}, false, entry(1, "hub2"), "hub1", own, Skip},
		{"unattributed", Held{}, false, entry(1, ""), "", own, Skip},
		{"unattributed, deleted when told to", Held{}, false, entry(1, ""), "", Orphans{Source: "hub1", Unattributed: true}, DeleteOrphan},
		{"ours, kept by choice", Held{}, false, entry(1, "hub1"), "", Orphans{Source: "hub1", Never: true}, Skip},
		{"ours, in the grace period", Held{}, false, entry(1, "hub1"), "", Orphans{Source: "hub1", Grace: true}, KeepOrphan},
		{"another's, in the grace period", Held{}, false, entry(1, "hub2"), "", Orphans{Source: "hub1", Grace: true}, Skip},
	}
	for _, tt := range tests {
		if got := Spec(tt.held, tt.ok, tt.e, tt.eventSource, tt.o); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

// The batches of one request form one session: a redelivered batch is
// answered once, what no batch named comes with the last one, and a retry
// of that after a failed send resumes where it stopped.
func TestSessionAssemblesBatches(t *testing.T) {
	var ss Sessions[string, int, struct{}]
	now := time.Now()
	s, fresh := ss.Open("c1", "req1", 2, time.Minute, now)
	if !fresh {
		t.Fatal("the first batch's session is not fresh")
	}
	s.Hold(map[string]int{"a": 1, "b": 2, "c": 3, "d": 4})
	if _, ok := s.Name("a"); !ok {
		t.Error("a is not held")
	}
	if _, ok := s.Name("zz"); ok {
		t.Error("zz is held")
	}
	s.finish(0)
	if s.complete() {
		t.Fatal("complete after one batch of two")
	}
	again, fresh := ss.Open("c1", "req1", 2, time.Minute, now)
	if fresh || again != s || !again.answered(0) || again.answered(1) {
		t.Fatalf("the second batch's session: fresh %v, same %v", fresh, again == s)
	}
	s.Name("b")
	s.finish(1)
	if !s.complete() {
		t.Fatal("not complete after both batches")
	}
	var mu sync.Mutex // the sends run at once
	if err := s.answerUnnamed(func(h int) error {
		return errors.New("broker gone") // not counted
	}); err == nil {
		t.Fatal("a failed send did not end the answer")
	}
	var rest []string
	if err := s.answerUnnamed(func(h int) error {
		mu.Lock()
		defer mu.Unlock()
		rest = append(rest, map[int]string{3: "c", 4: "d"}[h])
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(rest)
	if !slices.Equal(rest, []string{"c", "d"}) || s.Sent != 2 {
		t.Errorf("unnamed after a failed answer: %v (%d sent); want c and d, 2 sent", rest, s.Sent)
	}
	n := 0
	_ = s.answerUnnamed(func(int) error { n++; return nil })
	if n != 0 {
		t.Errorf("%d unnamed after all were sent", n)
	}

	// A newer request replaces the session; old ones are swept.
	newer, fresh := ss.Open("c1", "req2", 1, time.Minute, now)
	if !fresh || newer == s {
		t.Error("a newer request did not get a session of its own")
	}
	ss.Open("c2", "req3", 1, time.Minute, now.Add(2*time.Minute))
	if _, fresh := ss.Open("c1", "req2", 1, time.Minute, now.Add(2*time.Minute)); !fresh {
		t.Error("a session past its TTL was not swept")
	}
}

// Parallel stops starting calls at the first error, and never runs more
// than n at once.
func TestParallel(t *testing.T) {
	var calls []int
	done, err := Parallel([]int{1, 2, 3}, 1, func(i int) error {
		calls = append(calls, i) // n = 1: one call at a time
		if i == 2 {
			return errors.New("two")
		}
		return nil
	})
	if err == nil || !slices.Equal(done, []bool{true, false, false}) || !slices.Equal(calls, []int{1, 2}) {
		t.Errorf("Parallel = %v, %v after calls %v; want the error of 2, only 1 done, 3 never called", done, err, calls)
	}

	var running, most atomic.Int32
	items := make([]int, 200)
	done, err = Parallel(items, 4, func(int) error {
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		return nil
	})
	if err != nil || slices.Contains(done, false) || most.Load() > 4 {
		t.Errorf("Parallel of 200 by 4: %v, all done %v, at most %d at once", err, !slices.Contains(done, false), most.Load())
	}
}

// specSource holds one version of each resource, and fails its send of
// failAt once.
type specSource struct {
	held   map[string]int64
	failAt string
	mu     sync.Mutex
	failed bool
	sent   []string
}

func (s *specSource) List(context.Context) (map[string]string, error) {
	out := map[string]string{}
	for id := range s.held {
		out[id] = id
	}
	return out, nil
}

func (s *specSource) Held(id string) Held { return Held{Version: s.held[id]} }

func (s *specSource) Repair(_ context.Context, id string, _ int64) (string, error) { return id, nil }

func (s *specSource) Send(_ context.Context, id string, _ bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id == s.failAt && !s.failed {
		s.failed = true
		return errors.New("no acknowledgement in time")
	}
	s.sent = append(s.sent, id)
	return nil
}

func (s *specSource) DeleteOrphan(context.Context, types.ResourceVersion) error { return nil }

// An answer whose send failed is called again, as a retry of its task
// calls it: it sends what the failure left unsent, what no batch named
// included, and finishes the session.
func TestAnswerSpecResumesAfterAFailedSend(t *testing.T) {
	src := &specSource{held: map[string]int64{}, failAt: "r0"}
	for i := range 4 * Senders {
		src.held[fmt.Sprint("r", i)] = 1
	}
	var ss Sessions[string, string, struct{}]
	req := SpecRequest{ID: "req1", Index: 0, Total: 1} // an agent that holds nothing
	if _, err := AnswerSpec(context.Background(), &ss, "c1", time.Minute, req, Orphans{Source: "hub1"}, src, nil); err == nil {
		t.Fatal("the failed send did not end the answer")
	}
	a, err := AnswerSpec(context.Background(), &ss, "c1", time.Minute, req, Orphans{Source: "hub1"}, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(src.sent)
	if got := slices.Compact(src.sent); len(got) != len(src.held) || a.Done == nil {
		t.Errorf("after the retry: %d of %d resources sent, done %v", len(got), len(src.held), a.Done != nil)
	}
}
