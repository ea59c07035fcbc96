package server

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestTTLCache(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newTTLCache[int](time.Minute, 3)
	c.now = func() time.Time { return now }
	computed := 0
	get := func(key string, err error) (int, error) {
		return c.get(key, func() (int, error) { computed++; return computed, err }, func(err error) bool { return !errors.Is(err, errUndecided) })
	}

	if v, _ := get("a", nil); v != 1 {
		t.Fatalf("first get = %d, want 1", v)
	}
	now = now.Add(59 * time.Second)
	if v, _ := get("a", nil); v != 1 {
		t.Errorf("get within the TTL = %d, want the cached 1", v)
	}
	now = now.Add(time.Second)
	if v, _ := get("a", nil); v != 2 {
		t.Errorf("get at the TTL = %d, want a fresh 2", v)
	}

	denied := errors.New("denied")
	if _, err := get("d", denied); err != denied {
		t.Fatalf("denied get: %v", err)
	}
	if v, err := get("d", nil); v != 3 || err != denied {
		t.Errorf("second denied get = %d, %v; want the cached 3, denied", v, err)
	}

	for i := range 2 {
		if _, err := get("u", errUndecided); err != errUndecided {
			t.Fatalf("undecided get %d: %v", i, err)
		}
	}
	if computed != 5 {
		t.Errorf("computed %d times, want 5 (undecided answers are not cached)", computed)
	}

	// The cache holds at most 3 entries; expired ones go first.
	c.m = map[string]cacheEntry[int]{}
	for i := range 3 {
		_, _ = get(fmt.Sprint("k", i), nil)
	}
	now = now.Add(2 * time.Minute)
	_, _ = get("k3", nil)
	if len(c.m) != 1 {
		t.Errorf("after the others expired, %d entries; want 1", len(c.m))
	}
	for i := range 5 {
		_, _ = get(fmt.Sprint("fresh", i), nil)
	}
	if len(c.m) > 3 {
		t.Errorf("%d entries, more than the bound of 3", len(c.m))
	}
	c.ttl = 0
	before := computed
	_, _ = get("fresh4", nil)
	if computed != before+1 {
		t.Error("with a TTL of 0 answers are still cached")
	}
}

var errUndecided = errors.New("undecided")
