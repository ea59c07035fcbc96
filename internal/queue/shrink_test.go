package queue

import "testing"

// A queue that held many items and emptied gives their memory back: its
// pending map is made anew and its lane's array let go, while a queue that
// stays small keeps both for reuse.
func TestAnEmptiedQueueGivesItsMemoryBack(t *testing.T) {
	for _, tc := range []struct {
		items    int
		released bool
	}{{10, false}, {shrinkAbove + 1, true}} {
		q := New[int, int](1, func(old, new int) (int, int) { return new, old })
		for i := range tc.items {
			q.Add(i, 0, i)
		}
		for range tc.items {
			k, _, ok := q.Get()
			if !ok {
				t.Fatal("queue shut down")
			}
			q.Done(k)
		}
		if got := q.lanes[0].items == nil; got != tc.released {
			t.Errorf("%d items: lane released %v, want %v", tc.items, got, tc.released)
		}
		if got := q.peak == 0; got != tc.released {
			t.Errorf("%d items: pending map made anew %v (peak %d), want %v", tc.items, got, q.peak, tc.released)
		}
		// It still works.
		q.Add(1, 0, 1)
		if k, v, ok := q.Get(); !ok || k != 1 || v != 1 {
			t.Errorf("after emptying: Get = %v, %v, %v", k, v, ok)
		}
	}
}
