package generic

import (
	"strconv"
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

	// A restarted agent issues more than the last run did, though it
	// remembers nothing of it, once the clock has passed where the last run
	// left the sequence: its 8,000 IDs at one instant took two milliseconds'
	// 4,096 steps each.
	set(clock.Add(2 * time.Millisecond))
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

// Sequence IDs are snowflake IDs of node 1, as OCM sources parse them: they
// compare a status's ID with the last one they stored for the work by
// node (which must be equal), then time, then step. Ticks past a
// millisecond's 4,096 steps carry into the next millisecond.
func TestSequenceIDsAreSnowflakesOfOneNode(t *testing.T) {
	t.Parallel()
	clock := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	s := &sequence{now: func() time.Time { return clock }}
	parse := func(id string) (ms, node, step uint64) {
		t.Helper()
		v, err := strconv.ParseUint(id, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v >> 22, v >> 12 & 1023, v & 4095
	}
	var lastMS, lastStep uint64
	for i := range 10000 { // more than two milliseconds' worth of steps at one instant
		ms, node, step := parse(sequenceID(s.next()))
		if node != 1 {
			t.Fatalf("ID %d: node %d, want 1", i, node)
		}
		if i == 0 {
			if want := uint64(clock.UnixMilli() - 1288834974657); ms != want {
				t.Fatalf("first ID's time %d, want %d (ms since the snowflake epoch)", ms, want)
			}
		} else if ms < lastMS || (ms == lastMS && step <= lastStep) {
			t.Fatalf("ID %d (%d, %d) is not newer than (%d, %d)", i, ms, step, lastMS, lastStep)
		}
		lastMS, lastStep = ms, step
	}
	if ms, _, _ := parse(sequenceID(s.next())); ms != uint64(clock.UnixMilli()-1288834974657)+2 {
		t.Errorf("10,001 IDs at one instant reach millisecond +%d, want +2", ms-uint64(clock.UnixMilli()-1288834974657))
	}
}
