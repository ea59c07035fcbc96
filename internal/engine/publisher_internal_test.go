package engine

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubetypes "k8s.io/apimachinery/pkg/types"
	workv1 "open-cluster-management.io/api/work/v1"
)

// The publisher's lanes, measured apart from how its workers are
// scheduled: with one worker, a storm of deletes and the creates queued
// behind it go out in turn, so the last of 10 creates goes out after at
// most 10 deletes, not after the storm.
func TestPublisherSendsDeletesAndCreatesInTurn(t *testing.T) {
	t.Parallel()
	const storm, creates = 10000, 10
	var mu sync.Mutex
	var deleting []bool // per send, in order: whether it was a delete
	done := make(chan struct{})
	p := newPublisher("manifestwork", func(_ context.Context, w *workv1.ManifestWork) error {
		mu.Lock()
		defer mu.Unlock()
		deleting = append(deleting, w.DeletionTimestamp != nil)
		if len(deleting) == storm+creates {
			close(done)
		}
		return nil
	}, logr.Discard(), func(context.Context, error, string, ...any) {})
	now := metav1.Now()
	for i := range storm {
		p.enqueue(context.Background(), &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{UID: kubetypes.UID(fmt.Sprint("old-", i)), ResourceVersion: "2", DeletionTimestamp: &now}})
	}
	for i := range creates {
		p.enqueue(context.Background(), &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{UID: kubetypes.UID(fmt.Sprint("new-", i)), ResourceVersion: "1"}})
	}
	p.start(1)
	defer p.stop()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("not everything was sent")
	}
	mu.Lock()
	defer mu.Unlock()
	deletes, before := 0, 0
	for _, d := range deleting {
		if d {
			deletes++
		} else {
			before = deletes
		}
	}
	if before > creates {
		t.Errorf("the last of %d creates went out after %d deletes, want at most %d", creates, before, creates)
	}
}
