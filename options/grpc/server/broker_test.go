package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/workwire/sdk-go/options/grpc/protocol"
)

func sized(size int64) queued { return queued{msg: &protocol.CloudEvent{}, size: size} }

// The byte bound drops a subscriber as the count bound does; an empty queue
// takes one event of any size; a drop frees what was queued.
func TestSubscriberQueueBounds(t *testing.T) {
	t.Parallel()
	newSub := func(count, bytes int) *subscriber {
		return newSubscriber(1, &protocol.SubscriptionRequest{ClusterName: "c"}, nil, Identity{}, count, bytes, false)
	}

	s := newSub(10, 100)
	if !s.offer(sized(60)) || !s.offer(sized(40)) {
		t.Fatal("offers within the byte bound were refused")
	}
	if s.offer(sized(1)) {
		t.Fatal("an offer past the byte bound was accepted")
	}
	if !s.dropped.Load() {
		t.Fatal("overflowing the byte bound did not drop the subscriber")
	}
	if n, b := len(s.queue), s.bytes.Load(); n != 0 || b != 0 {
		t.Errorf("after the drop %d events of %d bytes stay queued, want none", n, b)
	}

	s = newSub(2, 1<<20)
	s.offer(sized(1))
	s.offer(sized(1))
	if s.offer(sized(1)) || !s.dropped.Load() {
		t.Error("overflowing the count bound did not drop the subscriber")
	}

	s = newSub(10, 100)
	if !s.offer(sized(1000)) {
		t.Error("an empty queue refused one event larger than the byte bound")
	}
	if s.offer(sized(1)) {
		t.Error("a queue over its byte bound took another event")
	}
}

// offerWait waits for bytes to be released rather than dropping the
// subscriber, and gives up when the subscriber is gone.
func TestOfferWaitWaitsForBytes(t *testing.T) {
	t.Parallel()
	s := newSubscriber(1, &protocol.SubscriptionRequest{ClusterName: "c"}, nil, Identity{}, 10, 100, false)
	if !s.offer(sized(80)) {
		t.Fatal("offer refused")
	}
	if s.reserve(80) {
		t.Fatal("reserved past the byte bound")
	}
	// Without room, offerWait waits: here until its context ends, queueing
	// and counting nothing.
	cancelled, stop := context.WithCancel(context.Background())
	stop()
	if err := s.offerWait(cancelled, sized(80)); !errors.Is(err, context.Canceled) {
		t.Fatalf("offerWait without room, its context cancelled: %v, want context.Canceled", err)
	}
	if len(s.queue) != 1 || s.bytes.Load() != 80 {
		t.Fatalf("after a cancelled offerWait: %d queued, %d bytes; want 1 and 80", len(s.queue), s.bytes.Load())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.offerWait(ctx, sized(80)) }()
	// The handler takes the first event: the waiter gets its room.
	q := <-s.queue
	s.dequeued(q)
	if err := <-done; err != nil {
		t.Fatalf("offerWait: %v", err)
	}
	if s.dropped.Load() {
		t.Error("offerWait dropped the subscriber")
	}
	if b := s.bytes.Load(); b != 80 {
		t.Errorf("%d bytes counted, want 80", b)
	}

	go func() { done <- s.offerWait(ctx, sized(80)) }()
	s.drop("test")
	if err := <-done; !errors.Is(err, errSubscriberGone) {
		t.Errorf("offerWait on a dropped subscriber: %v, want errSubscriberGone", err)
	}
}

// A subscriber that names data types gets those (either form) and events
// whose type names none; one that names none gets every data type.
func TestSubscriberWantsItsDataTypes(t *testing.T) {
	t.Parallel()
	const works = "io.open-cluster-management.works.v1alpha1.manifestbundles"
	q := func(typ string) queued { return newQueued("c", &protocol.CloudEvent{Type: typ}, eventDataType(typ)) }
	dts, err := parseDataTypes([]string{works})
	if err != nil {
		t.Fatal(err)
	}
	some := newSubscriber(1, &protocol.SubscriptionRequest{ClusterName: "c", DataTypes: []string{works}}, dts, Identity{}, 1, 1, false)
	all := newSubscriber(2, &protocol.SubscriptionRequest{ClusterName: "c"}, nil, Identity{}, 1, 1, false)
	for _, tc := range []struct {
		typ       string
		some, all bool
	}{
		{works + ".spec.create_request", true, true},
		{"io.open-cluster-management.works.v1alpha1.manifestbundle.spec.create_request", true, true},
		{"io.open-cluster-management.works.v1alpha1.manifests.spec.create_request", false, true},
		{"io.example.things.v1.things.status.resync_request", false, true},
		{"bogus", true, true},
		{"", true, true},
	} {
		if got := some.wants(q(tc.typ)); got != tc.some {
			t.Errorf("a subscriber of %s wants %q: %v, want %v", works, tc.typ, got, tc.some)
		}
		if got := all.wants(q(tc.typ)); got != tc.all {
			t.Errorf("a subscriber of every data type wants %q: %v, want %v", tc.typ, got, tc.all)
		}
	}
}
