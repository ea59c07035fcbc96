package generic

import (
	"sync"
	"testing"
	"time"
)

// A sequence is strictly increasing across goroutines, starts above every
// value an earlier run issued (its floor is the wall clock), and stays
// increasing when the clock goes back.
func TestSequence(t *testing.T) {
	t.Parallel()
	clock := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	set := func(t time.Time) { mu.Lock(); clock = t; mu.Unlock() }

	first := &sequence{now: now}
	const goroutines, each = 8, 1000
	got := make([][]uint64, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for range each {
				got[g] = append(got[g], first.next())
			}
		})
	}
	wg.Wait()
	seen := make(map[uint64]bool, goroutines*each)
	var last uint64
	for _, vs := range got {
		for i, v := range vs {
			if i > 0 && v <= vs[i-1] {
				t.Fatalf("not increasing within a goroutine: %d after %d", v, vs[i-1])
			}
			if seen[v] {
				t.Fatalf("%d issued twice", v)
			}
			seen[v] = true
			last = max(last, v)
		}
	}

	// A restarted agent, a millisecond later, issues more than the last
	// run did, though it remembers nothing of it.
	set(clock.Add(time.Millisecond))
	restarted := &sequence{now: now}
	if v := restarted.next(); v <= last {
		t.Errorf("after a restart: %d, not above the last run's %d", v, last)
	}

	// The clock going back an hour does not make the sequence go back.
	before := restarted.next()
	set(clock.Add(-time.Hour))
	if v := restarted.next(); v <= before {
		t.Errorf("after the clock went back: %d, not above %d", v, before)
	}

	// A clock before 1970 has no floor; the sequence still counts up.
	zero := &sequence{now: func() time.Time { return time.Unix(-5, 0) }}
	if a, b := zero.next(), zero.next(); a != 1 || b != 2 {
		t.Errorf("without a clock: %d, %d; want 1, 2", a, b)
	}
}

// A reserved block lies above every ID issued before it and below every ID
// issued after it.
func TestSequenceReserve(t *testing.T) {
	t.Parallel()
	s := &sequence{now: func() time.Time { return time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC) }}
	before := s.next()
	first := s.reserve(1000)
	after := s.next()
	if first <= before || after != first+1000 {
		t.Errorf("before %d, block %d..%d, after %d", before, first, first+999, after)
	}
}
