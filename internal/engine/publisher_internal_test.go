package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubetypes "k8s.io/apimachinery/pkg/types"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/options"
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

// sendLog is a publisher's send that records what it is given, in order,
// and fails as fail says.
type sendLog struct {
	mu    sync.Mutex
	sent  []string          // name/resourceVersion
	fail  func(n int) error // for the nth send, from 0
	added chan struct{}
}

func newSendLog(fail func(n int) error) *sendLog {
	return &sendLog{fail: fail, added: make(chan struct{}, 100)}
}

func (l *sendLog) send(_ context.Context, w *workv1.ManifestWork) error {
	l.mu.Lock()
	n := len(l.sent)
	l.sent = append(l.sent, w.Name+"/"+w.ResourceVersion)
	l.mu.Unlock()
	l.added <- struct{}{}
	return l.fail(n)
}

// await returns the first n sends, once they happened.
func (l *sendLog) await(t *testing.T, n int) []string {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		l.mu.Lock()
		sent := slices.Clone(l.sent)
		l.mu.Unlock()
		if len(sent) >= n {
			return sent[:n]
		}
		select {
		case <-l.added:
		case <-timeout:
			t.Fatalf("%d sends (%v), want %d", len(sent), sent, n)
		}
	}
}

func work(uid, name, rv string) *workv1.ManifestWork {
	return &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{UID: kubetypes.UID(uid), Name: name, ResourceVersion: rv}}
}

// newTestPublisher is a publisher over l with one worker, whose retries
// wait longer than any test: what is sent again is sent for the connect.
func newTestPublisher(t *testing.T, l *sendLog) *publisher[*workv1.ManifestWork] {
	p := newPublisher("manifestwork", l.send, logr.Discard(), func(context.Context, error, string, ...any) {})
	p.retry = options.Backoff{Min: time.Hour, Max: time.Hour}
	p.start(1)
	t.Cleanup(p.stop)
	return p
}

var errAway = fmt.Errorf("send: %w", options.ErrNotConnected)

// failFirst fails the first send for want of a connection.
func failFirst(n int) error {
	if n == 0 {
		return errAway
	}
	return nil
}

// A publish that fails for want of a connection goes out again at the
// transport's next connect, not at a retry (an hour away here).
func TestPublisherSendsAtTheConnectWhatFailedWhileAway(t *testing.T) {
	t.Parallel()
	l := newSendLog(failFirst)
	p := newTestPublisher(t, l)
	p.enqueue(context.Background(), work("1", "w1", "1"))
	l.await(t, 1)
	p.connected()
	if got, want := l.await(t, 2), []string{"w1/1", "w1/1"}; !slices.Equal(got, want) {
		t.Errorf("sent %v, want %v", got, want)
	}
}

// A connect that comes while the failing send is under way does not leave
// it waiting for the one after.
func TestPublisherSendsAgainWhatFailedAsTheConnectionCameBack(t *testing.T) {
	t.Parallel()
	var p *publisher[*workv1.ManifestWork]
	l := newSendLog(func(n int) error {
		if n == 0 {
			p.connected()
			return errAway
		}
		return nil
	})
	p = newTestPublisher(t, l)
	p.enqueue(context.Background(), work("1", "w1", "1"))
	if got, want := l.await(t, 2), []string{"w1/1", "w1/1"}; !slices.Equal(got, want) {
		t.Errorf("sent %v, want %v", got, want)
	}
}

// A send that failed, then was superseded by a newer version of the object
// that went out, is not sent at the connect: it would overtake the newer.
func TestPublisherDoesNotSendAtTheConnectWhatANewerVersionReplaced(t *testing.T) {
	t.Parallel()
	l := newSendLog(failFirst)
	p := newTestPublisher(t, l)
	p.enqueue(context.Background(), work("1", "w1", "1"))
	l.await(t, 1)
	p.enqueue(context.Background(), work("1", "w1", "2"))
	l.await(t, 2)
	p.connected()
	p.enqueue(context.Background(), work("2", "w2", "1")) // one worker: after anything the connect queued
	if got, want := l.await(t, 3), []string{"w1/1", "w1/2", "w2/1"}; !slices.Equal(got, want) {
		t.Errorf("sent %v, want %v", got, want)
	}
}

// A publish that failed otherwise, past its retries, also goes out again
// at the next connect.
func TestPublisherSendsAtTheConnectWhatFailedPastItsRetries(t *testing.T) {
	t.Parallel()
	l := newSendLog(func(n int) error {
		if n < publishAttempts {
			return errors.New("broker busy")
		}
		return nil
	})
	p := newPublisher("manifestwork", l.send, logr.Discard(), func(context.Context, error, string, ...any) {})
	p.retry = options.Backoff{Min: time.Nanosecond, Max: time.Nanosecond}
	p.start(1)
	defer p.stop()
	p.enqueue(context.Background(), work("1", "w1", "1"))
	l.await(t, publishAttempts)
	p.connected()
	if got := l.await(t, publishAttempts+1); got[publishAttempts] != "w1/1" {
		t.Errorf("sent %v, want w1/1 last", got)
	}
}
