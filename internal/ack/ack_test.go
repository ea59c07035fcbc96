package ack

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/workwire/sdk-go/pending"
)

var (
	t0   = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	p1   = Peer{Cluster: "c1", DataType: "dt"}
	p2   = Peer{Cluster: "c2", DataType: "dt"}
	conf = Config{After: 10 * time.Second, Max: time.Minute, PerRound: 3}
)

func at(d time.Duration) time.Time { return t0.Add(d) }

func ids(d []Due) []string {
	var out []string
	for _, x := range d {
		out = append(out, x.ResourceID)
	}
	return out
}

func TestAnAcknowledgedSpecIsNeverDue(t *testing.T) {
	tr := New(conf)
	tr.Send(p1, "a", 1, true, nil, t0)
	tr.Send(p1, "b", 1, true, nil, t0)
	if d, ok, _ := tr.Acked(p1, "a", 1, at(time.Second)); !ok || d != time.Second {
		t.Fatalf("Acked = %v, %v; want 1s, true", d, ok)
	}
	if _, ok, _ := tr.Acked(p1, "a", 1, at(time.Second)); ok {
		t.Fatal("a second status acknowledged the same spec again")
	}
	tr.Acked(p1, "b", 2, at(time.Second)) // a newer version acknowledges an older one
	if due := tr.Due(at(time.Hour)); len(due) != 0 {
		t.Fatalf("due after every spec was acknowledged: %v", due)
	}
	if n, _ := tr.Pending(at(time.Hour)); n != 0 {
		t.Fatalf("pending = %d, want 0", n)
	}
}

func TestAnOlderStatusAcknowledgesNothing(t *testing.T) {
	tr := New(conf)
	tr.Send(p1, "a", 1, true, nil, t0)
	tr.Send(p1, "a", 2, false, nil, at(time.Second))
	if _, ok, _ := tr.Acked(p1, "a", 1, at(2*time.Second)); ok {
		t.Fatal("a status at version 1 acknowledged version 2")
	}
	due := tr.Due(at(time.Minute))
	if got := due[p1]; len(got) != 1 || got[0] != (Due{ResourceID: "a", Version: 2}) {
		t.Fatalf("due = %+v, want a at version 2, sent as an update", due)
	}
}

func TestDueOldestFirstBoundedPerRoundAndBackingOff(t *testing.T) {
	tr := New(conf)
	for i, id := range []string{"e", "d", "c", "b", "a"} {
		tr.Send(p1, id, 1, true, nil, at(time.Duration(i)*time.Millisecond))
	}
	tr.Send(p1, "z", 1, true, nil, at(9*time.Second))
	tr.Acked(p1, "z", 1, at(9*time.Second)) // the agent spoke after the others were sent
	if due := tr.Due(at(9 * time.Second)); len(due) != 0 {
		t.Fatalf("due before After: %v", due)
	}
	round1 := tr.Due(at(10*time.Second + 10*time.Millisecond))
	if got := ids(round1[p1]); !slices.Equal(got, []string{"e", "d", "c"}) {
		t.Fatalf("first round = %v, want the 3 oldest, oldest first", got)
	}
	round2 := tr.Due(at(11 * time.Second))
	if got := ids(round2[p1]); !slices.Equal(got, []string{"b", "a"}) {
		t.Fatalf("second round = %v, want the 2 left", got)
	}
	// Re-sent at 10s, e waits twice After before it is due again.
	if got := ids(tr.Due(at(30 * time.Second))[p1]); len(got) != 0 {
		t.Fatalf("due again before its backoff: %v", got)
	}
	tr.Acked(p1, "z", 1, at(30*time.Second)) // still talking
	if got := ids(tr.Due(at(31 * time.Second))[p1]); !slices.Equal(got, []string{"e", "d", "c"}) {
		t.Fatalf("third round = %v, want e, d, c again", got)
	}
	// The backoff stops growing at Max.
	now := at(31 * time.Second)
	for range 10 {
		now = now.Add(conf.Max)
		tr.Acked(p1, "z", 1, now)
		if got := ids(tr.Due(now)[p1]); len(got) != 3 {
			t.Fatalf("at %v: due %v, want 3 every Max", now.Sub(t0), got)
		}
	}
}

func TestASilentAgentGetsOneProbeAtATime(t *testing.T) {
	tr := New(conf)
	tr.Acked(p1, "old", 1, t0) // last heard
	for i := range 20 {
		tr.Send(p1, string(rune('a'+i)), 1, true, nil, at(time.Second))
	}
	probes := 0
	for now := at(time.Second); now.Before(at(91 * time.Second)); now = now.Add(time.Second) {
		probes += len(tr.Due(now)[p1])
	}
	// Due at 11s: one probe; the next after twice the wait (20s), then 40s.
	if probes != 3 {
		t.Fatalf("%d probes in 90s to an agent that said nothing, want 3 (at 11s, 31s, 71s)", probes)
	}
	tr.Acked(p1, "a", 1, at(91*time.Second))
	if got := tr.Due(at(91 * time.Second))[p1]; len(got) != conf.PerRound {
		t.Fatalf("after the agent spoke: %d due, want a full round of %d", len(got), conf.PerRound)
	}
}

func TestAResyncForgetsWhatWasSent(t *testing.T) {
	tr := New(conf)
	tr.Send(p1, "a", 1, true, nil, t0)
	tr.Send(p2, "a", 1, true, nil, t0)
	tr.Resynced(p1, at(time.Second))
	if got := slices.Collect(maps.Keys(tr.Due(at(time.Hour)))); !slices.Equal(got, []Peer{p2}) {
		t.Fatalf("due for %v, want only the peer that did not resync", got)
	}
	tr.Forget(p2, "a")
	if n, _ := tr.Pending(at(time.Hour)); n != 0 {
		t.Fatalf("pending = %d after Forget, want 0", n)
	}
}

func TestASlowAgentWaitsTwiceItsSlowestAcknowledgement(t *testing.T) {
	tr := New(conf)
	tr.Send(p1, "backlog", 1, true, nil, t0)
	tr.Acked(p1, "backlog", 1, at(30*time.Second)) // 30s behind
	tr.Send(p1, "a", 1, true, nil, at(30*time.Second))
	tr.Acked(p1, "x", 1, at(31*time.Second)) // it speaks
	if got := tr.Due(at(89 * time.Second))[p1]; len(got) != 0 {
		t.Fatalf("due after 59s, want none before 60s (twice 30s): %v", got)
	}
	if got := tr.Due(at(90 * time.Second))[p1]; len(got) != 1 {
		t.Fatalf("due at 60s: %v, want a", got)
	}
	tr.Acked(p1, "a", 1, at(91*time.Second))
	// Two quiet windows later the backlog is forgotten: After again.
	tr.Send(p1, "b", 1, true, nil, at(5*time.Minute))
	tr.Acked(p1, "y", 1, at(5*time.Minute+time.Second))
	if got := tr.Due(at(5*time.Minute + 10*time.Second))[p1]; len(got) != 1 || got[0].ResourceID != "b" {
		t.Fatalf("due %v, want b after After", got)
	}
}

func TestPendingAge(t *testing.T) {
	tr := New(conf)
	tr.Send(p1, "a", 1, true, nil, t0)
	tr.Send(p2, "b", 1, true, nil, at(time.Second))
	if n, oldest := tr.Pending(at(5 * time.Second)); n != 2 || oldest != 5*time.Second {
		t.Fatalf("Pending = %d, %v; want 2, 5s", n, oldest)
	}
}

func TestTheWindowHoldsBackWhatExceedsIt(t *testing.T) {
	tr := New(Config{After: 10 * time.Second, Max: time.Minute, PerRound: 3, Window: 2})
	sent := 0
	for i, id := range []string{"a", "b", "c", "d"} {
		if tr.Send(p1, id, 1, true, "obj-"+id, at(time.Duration(i)*time.Millisecond)) {
			sent++
		}
	}
	if sent != 2 {
		t.Fatalf("%d sent at once, want the window's 2", sent)
	}
	// A newer version of a held-back spec replaces it.
	if tr.Send(p1, "c", 2, false, "obj-c2", at(5*time.Millisecond)) {
		t.Fatal("a newer version of a held-back spec went past the window")
	}
	// A newer version of a spec in flight goes at once, in its place.
	if !tr.Send(p1, "a", 2, false, "obj-a2", at(6*time.Millisecond)) {
		t.Fatal("a newer version of a spec in flight was held back")
	}
	// An acknowledgement about as fast as the fastest grows the window by
	// one: two go.
	_, ok, released := tr.Acked(p1, "b", 1, at(10*time.Millisecond))
	if !ok || len(released) != 2 || released[0] != (Due{ResourceID: "c", Version: 2, Object: "obj-c2"}) || released[1].ResourceID != "d" {
		t.Fatalf("acknowledging b released %+v, want c at version 2, as an update, with its newest object, then d", released)
	}
	if n, _ := tr.Pending(at(time.Second)); n != 3 {
		t.Fatalf("pending = %d, want a, c and d in flight", n)
	}
}

func TestTheWindowShrinksForASlowAgentAndHalvesOnALoss(t *testing.T) {
	tr := New(Config{After: 10 * time.Second, Max: time.Minute, PerRound: 1000, Window: 200})
	window := func() float64 { return tr.peers[p1].window }
	now := t0
	id := 0
	send := func(n int) {
		for range n {
			tr.Send(p1, fmt.Sprint(id), 1, true, id, now)
			id++
		}
	}
	send(1)
	now = now.Add(10 * time.Millisecond)
	tr.Acked(p1, "0", 1, now) // the fastest: 10ms
	if window() != 201 {
		t.Fatalf("window %v after a fast acknowledgement, want 201", window())
	}
	// A backlog: each acknowledgement 5s after its send.
	send(200)
	now = now.Add(5 * time.Second)
	for i := 1; i <= 50; i++ {
		tr.Acked(p1, fmt.Sprint(i), 1, now)
	}
	if window() != 151 {
		t.Fatalf("window %v after 50 slow acknowledgements, want 151", window())
	}
	for i := 51; i <= 200; i++ {
		tr.Acked(p1, fmt.Sprint(i), 1, now)
	}
	if window() != MinWindow {
		t.Fatalf("window %v, want no less than %d", window(), MinWindow)
	}
	// Specs that turn out lost halve it (down to its least).
	tr.peers[p1].window = 400
	send(1)
	tr.Due(now.Add(time.Hour))
	if window() != 200 {
		t.Fatalf("window %v after a loss, want 200", window())
	}
}

func TestAResyncReleasesTheWindow(t *testing.T) {
	tr := New(Config{After: 10 * time.Second, Max: time.Minute, PerRound: 3, Window: 1})
	tr.Send(p1, "a", 1, true, nil, t0)
	if tr.Send(p1, "b", 1, true, nil, t0) {
		t.Fatal("b went past a window of 1")
	}
	tr.Resynced(p1, at(time.Second))
	if !tr.Send(p1, "b", 1, true, nil, at(time.Second)) {
		t.Fatal("the resync's answer was held back by what the resync settled")
	}
}

// A report counts every spec waiting per agent, and lists the oldest
// first, up to the query's top, of the cluster it asks for.
func TestReport(t *testing.T) {
	tr := New(Config{After: time.Minute, Max: time.Hour, PerRound: 10, Window: 1})
	t0 := time.Now()
	a, b := Peer{Cluster: "a", DataType: "works"}, Peer{Cluster: "b", DataType: "works"}
	tr.Send(a, "a1", 1, true, "obj", t0)
	tr.Send(b, "b1", 3, true, "obj", t0.Add(time.Second))
	tr.Send(a, "a2", 1, true, "obj", t0.Add(2*time.Second)) // held: a's window is 1
	tr.Send(b, "b2", 1, true, "obj", t0.Add(3*time.Second)) // held
	tr.Acked(b, "b1", 3, t0.Add(4*time.Second))             // b2 goes out
	now := t0.Add(10 * time.Second)

	r := tr.Report(pending.Query{}, now)
	if r.Waiting != 3 || r.ClustersWaiting != 2 || r.OldestSeconds != 10 || len(r.Specs) != 3 {
		t.Fatalf("report: %+v", r)
	}
	want := []pending.Cluster{
		{Name: "a", DataType: "works", Waiting: 2, Held: 1, OldestSeconds: 10},
		{Name: "b", DataType: "works", Waiting: 1, OldestSeconds: 7, LastHeard: t0.Add(4 * time.Second)},
	}
	if diff := cmp.Diff(want, r.Clusters); diff != "" {
		t.Errorf("clusters (-want +got):\n%s", diff)
	}
	if got := []string{r.Specs[0].ResourceID, r.Specs[1].ResourceID, r.Specs[2].ResourceID}; !slices.Equal(got, []string{"a1", "a2", "b2"}) || !r.Specs[1].Held {
		t.Errorf("specs: %+v", r.Specs)
	}

	if r := tr.Report(pending.Query{Top: 1}, now); r.ClustersWaiting != 2 || len(r.Clusters) != 1 || r.Clusters[0].Name != "a" || len(r.Specs) != 1 {
		t.Errorf("top 1: %+v", r)
	}
	r = tr.Report(pending.Query{Cluster: "a", Top: 1}, now)
	if r.Waiting != 2 || len(r.Clusters) != 1 || len(r.Specs) != 1 || r.Specs[0].ResourceID != "a1" || r.Specs[0].Version != 1 {
		t.Errorf("cluster a, top 1: %+v", r)
	}
	if r := tr.Report(pending.Query{Cluster: "c"}, now); r.Waiting != 0 || len(r.Clusters) != 0 || len(r.Specs) != 0 {
		t.Errorf("cluster c: %+v", r)
	}
}
