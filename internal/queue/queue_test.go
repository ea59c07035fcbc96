package queue

import (
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newest(old, new int) (keep, discard int) {
	if new > old {
		return new, old
	}
	return old, new
}

func TestMergesPendingItemsOfOneKey(t *testing.T) {
	t.Parallel()
	q := New[string](1, newest)
	q.Add("a", 0, 1)
	if drop, merged, _ := q.Add("a", 0, 3); !merged || drop != 1 {
		t.Fatalf("Add merged=%v dropped=%d, want the older item (1) dropped", merged, drop)
	}
	if drop, merged, _ := q.Add("a", 0, 2); !merged || drop != 2 {
		t.Fatalf("an older item must not replace a newer one: dropped %d", drop)
	}
	if n := q.Len(); n != 1 {
		t.Fatalf("Len %d, want 1", n)
	}
	k, v, ok := q.Get()
	if !ok || k != "a" || v != 3 {
		t.Fatalf("Get = %s %d %v, want a 3 true", k, v, ok)
	}
	q.Done(k)
	q.ShutDown()
}

func TestOneWorkerPerKey(t *testing.T) {
	t.Parallel()
	q := New[string](1, newest)
	q.Add("a", 0, 1)
	k, _, _ := q.Get()
	q.Add("a", 0, 2) // arrives while "a" is being processed
	q.Add("b", 0, 1)
	k2, _, _ := q.Get()
	if k2 != "b" {
		t.Fatalf("got %q while a was active, want b", k2)
	}
	q.Done(k2)
	q.Done(k)
	k3, v3, _ := q.Get()
	if k3 != "a" || v3 != 2 {
		t.Fatalf("after Done got %s %d, want a 2", k3, v3)
	}
	q.Done(k3)
	q.ShutDown()
}

func TestLanesAreFair(t *testing.T) {
	t.Parallel()
	q := New[int](2, newest)
	const deletes = 10000
	for i := range deletes {
		q.Add(i, 1, i)
	}
	q.Add(-1, 0, 0) // one create behind 10,000 deletes
	for n := 0; ; n++ {
		k, _, _ := q.Get()
		q.Done(k)
		if k == -1 {
			if n > 1 {
				t.Fatalf("the create waited behind %d deletes", n)
			}
			break
		}
	}
	q.ShutDown()
}

func TestAddAfterAndShutDown(t *testing.T) {
	t.Parallel()
	q := New[string](1, newest)
	q.AddAfter("later", 0, 1, time.Millisecond, nil)
	k, v, ok := q.Get()
	if !ok || k != "later" || v != 1 {
		t.Fatalf("Get = %s %d %v", k, v, ok)
	}
	q.Done(k)

	var released []int
	var mu sync.Mutex
	q.AddAfter("never", 0, 7, time.Hour, func(v int) { mu.Lock(); released = append(released, v); mu.Unlock() })
	q.Add("left", 0, 5)
	left := q.ShutDown()
	if len(left) != 1 || left[0] != 5 {
		t.Fatalf("ShutDown returned %v, want [5]", left)
	}
	if _, _, ok := q.Get(); ok {
		t.Fatal("Get after ShutDown returned an item")
	}
	if _, _, accepted := q.Add("x", 0, 1); accepted {
		t.Fatal("Add after ShutDown was accepted")
	}
	q.AddAfter("y", 0, 9, 0, func(v int) { mu.Lock(); released = append(released, v); mu.Unlock() })
	mu.Lock()
	defer mu.Unlock()
	if len(released) != 1 || released[0] != 9 {
		t.Fatalf("released %v, want [9]", released)
	}
}

func TestGetBlocksUntilAddOrShutDown(t *testing.T) {
	t.Parallel()
	q := New[string](1, newest)
	got := make(chan string)
	go func() {
		for {
			k, _, ok := q.Get()
			if !ok {
				close(got)
				return
			}
			got <- k
			q.Done(k)
		}
	}()
	q.Add("a", 0, 1)
	if k := <-got; k != "a" {
		t.Fatalf("got %q", k)
	}
	q.ShutDown()
	if _, open := <-got; open {
		t.Fatal("worker did not stop")
	}
}

func BenchmarkAddGet(b *testing.B) {
	q := New[int](3, newest)
	b.ReportAllocs()
	for i := range b.N {
		q.Add(i%1024, i%3, i)
		k, _, _ := q.Get()
		q.Done(k)
	}
}
