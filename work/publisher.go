package work

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	kubetypes "k8s.io/apimachinery/pkg/types"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/internal/queue"
	"github.com/workwire/sdk-go/options"
)

// publishAttempts bounds the retries of one publish. Past it, resync is
// what delivers the change (the peer's next resync finds it missing).
// Permanent errors (see permanent) are not retried.
const publishAttempts = 8

// permanent reports whether err is one that sending the same snapshot
// again cannot fix: the event is larger than the transport or its broker
// takes (options.ErrTooLarge), the codec cannot encode the work, whichever
// codec it is (generic.ErrEncode), or encoded it as no valid CloudEvent
// (options.ErrInvalidEvent). Resync cannot deliver such a work
// either: it stays undelivered until it changes. Anything else (not
// connected, a broker that failed, a timeout) may pass on a later try.
func permanent(err error) bool {
	return errors.Is(err, options.ErrTooLarge) || errors.Is(err, generic.ErrEncode) || errors.Is(err, options.ErrInvalidEvent)
}

// publisher sends works — specs on a hub, statuses on an agent — off the
// caller's goroutine, so a clientset write never waits for the broker. Per
// work only the newest snapshot waits (an older one is superseded); deletes
// have a lane of their own, so a delete storm never starves creates.
type publisher struct {
	send    func(ctx context.Context, w *workv1.ManifestWork) error
	log     logr.Logger
	onError generic.ErrorHandler
	q       *queue.Queue[kubetypes.UID, *pubTask]

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type pubTask struct {
	w       *workv1.ManifestWork // an immutable snapshot
	attempt int
}

func newPublisher(send func(context.Context, *workv1.ManifestWork) error, log logr.Logger, onError generic.ErrorHandler) *publisher {
	ctx, cancel := context.WithCancel(context.Background())
	return &publisher{
		send:    send,
		log:     log,
		onError: onError,
		q:       queue.New[kubetypes.UID](2, newerTask),
		ctx:     ctx,
		cancel:  cancel,
	}
}

// newerTask keeps the snapshot with the higher resourceVersion.
func newerTask(old, new *pubTask) (keep, discard *pubTask) {
	if rv(new.w) >= rv(old.w) {
		return new, old
	}
	return old, new
}

func rv(w *workv1.ManifestWork) uint64 {
	n, _ := strconv.ParseUint(w.ResourceVersion, 10, 64)
	return n
}

// enqueue queues a snapshot of w for sending. w must not change afterwards.
func (p *publisher) enqueue(w *workv1.ManifestWork) {
	p.q.Add(w.UID, lane(w), &pubTask{w: w})
}

func lane(w *workv1.ManifestWork) int {
	if w.DeletionTimestamp != nil {
		return 1
	}
	return 0
}

func (p *publisher) start(workers int) {
	for range workers {
		p.wg.Add(1)
		go p.run()
	}
}

// stop drops what waits and returns once the workers are gone.
func (p *publisher) stop() {
	p.cancel()
	p.q.ShutDown()
	p.wg.Wait()
}

func (p *publisher) run() {
	defer p.wg.Done()
	for {
		uid, t, ok := p.q.Get()
		if !ok {
			return
		}
		err := p.send(p.ctx, t.w)
		switch {
		case err == nil, p.ctx.Err() != nil:
		case permanent(err):
			// Not retried, so it holds up nothing; only a new version of
			// the work can go out.
			p.onError(p.ctx, fmt.Errorf("publish work %s/%s: %w", t.w.Namespace, t.w.Name, err), "cannot publish the work; not retried, it stays undelivered until it changes",
				"work", t.w.Namespace+"/"+t.w.Name, "uid", t.w.UID, "generation", t.w.Generation)
		case t.attempt+1 < publishAttempts && !p.q.Pending(uid):
			t.attempt++
			d := min(100*time.Millisecond<<t.attempt, 30*time.Second)
			d = d/2 + rand.N(d/2+1)
			p.log.V(2).Info("publish failed; retrying", "work", t.w.Namespace+"/"+t.w.Name, "attempt", t.attempt, "after", d, "err", err)
			p.q.AddAfter(uid, lane(t.w), t, d, nil)
		default:
			p.onError(p.ctx, fmt.Errorf("publish work %s/%s: %w", t.w.Namespace, t.w.Name, err), "publish failed; resync will deliver it", "work", t.w.Namespace+"/"+t.w.Name, "uid", t.w.UID, "generation", t.w.Generation)
		}
		p.q.Done(uid)
	}
}
