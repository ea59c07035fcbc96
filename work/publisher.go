package work

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"
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

// publishRetry paces them: 200ms doubling per attempt up to 30s, with
// jitter.
var publishRetry = options.Backoff{Min: 200 * time.Millisecond, Max: 30 * time.Second}

// permanent reports whether err is one that sending the same snapshot
// again cannot fix: the event is larger than the transport or its broker
// takes (options.ErrTooLarge), the codec cannot encode the work, whichever
// codec it is (generic.ErrEncode), or encoded it as no valid CloudEvent
// (options.ErrInvalidEvent), or the work's cluster names no route
// (options.ErrInvalidRoute). Resync cannot deliver such a work
// either: it stays undelivered until it changes. Anything else (not
// connected, a broker that failed, a timeout) may pass on a later try.
func permanent(err error) bool {
	return errors.Is(err, options.ErrTooLarge) || errors.Is(err, generic.ErrEncode) ||
		errors.Is(err, options.ErrInvalidEvent) || errors.Is(err, options.ErrInvalidRoute)
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

	// resend, when set (an agent's WithStatusResend), sends a work again
	// this long after the first send of each of its later generations (not
	// the first this publisher sees), as latest has it then, and after its
	// last send, once latest no longer has it (an agent's Deleted status);
	// resent holds the generation last sent or scheduled per work, or
	// resentLast.
	resend time.Duration
	latest func(kubetypes.UID) (*workv1.ManifestWork, bool)
	mu     sync.Mutex
	resent map[kubetypes.UID]int64

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type pubTask struct {
	w       *workv1.ManifestWork // an immutable snapshot
	span    trace.SpanContext    // the write's, parent of the send's; zero if none
	attempt int
	resend  bool // send the work as latest has it, or w if latest no longer has it
}

// resentLast marks a work whose last send is scheduled again.
const resentLast = -1

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

// withResend makes p send a work again d after the first send of each of
// its generations but the first it sends, as latest then has it, and d
// after its last send, when latest no longer has it.
func (p *publisher) withResend(d time.Duration, latest func(kubetypes.UID) (*workv1.ManifestWork, bool)) {
	p.resend, p.latest, p.resent = d, latest, make(map[kubetypes.UID]int64)
}

// newerTask keeps the snapshot with the higher resourceVersion (a resend
// carries the one it followed; it sends the latest).
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
// enqueue queues w to be published, as a child of the span of ctx.
func (p *publisher) enqueue(ctx context.Context, w *workv1.ManifestWork) {
	p.q.Add(w.UID, lane(w), &pubTask{w: w, span: trace.SpanContextFromContext(ctx)})
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
		if t.resend {
			if w, ok := p.latest(uid); ok {
				t = &pubTask{w: w, resend: true}
			}
		}
		ctx := p.ctx
		if t.span.IsValid() {
			ctx = trace.ContextWithSpanContext(ctx, t.span)
		}
		err := p.send(ctx, t.w)
		switch {
		case err == nil:
			p.scheduleResend(uid, t)
		case p.ctx.Err() != nil:
		case permanent(err):
			// Not retried, so it holds up nothing; only a new version of
			// the work can go out.
			p.onError(p.ctx, fmt.Errorf("publish work %s/%s: %w", t.w.Namespace, t.w.Name, err), "cannot publish the work; not retried, it stays undelivered until it changes",
				"work", t.w.Namespace+"/"+t.w.Name, "uid", t.w.UID, "generation", t.w.Generation)
		case t.attempt+1 < publishAttempts && !p.q.Pending(uid):
			t.attempt++
			d := publishRetry.Delay(t.attempt - 1)
			p.log.V(2).Info("publish failed; retrying", "work", t.w.Namespace+"/"+t.w.Name, "attempt", t.attempt, "after", d, "err", err)
			p.q.AddAfter(uid, lane(t.w), t, d, nil)
		default:
			p.onError(p.ctx, fmt.Errorf("publish work %s/%s: %w", t.w.Namespace, t.w.Name, err), "publish failed; resync will deliver it", "work", t.w.Namespace+"/"+t.w.Name, "uid", t.w.UID, "generation", t.w.Generation)
		}
		p.q.Done(uid)
	}
}

// scheduleResend queues t's work to be sent again after p.resend, if t was
// the first send of a generation after the first one p sent, or the work's
// last send.
func (p *publisher) scheduleResend(uid kubetypes.UID, t *pubTask) {
	if p.resend <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	_, held := p.latest(uid)
	last, known := p.resent[uid]
	switch {
	case !held && (t.resend || last == resentLast):
		delete(p.resent, uid) // the last send, sent again: done
		return
	case !held:
		p.resent[uid] = resentLast
	case !known:
		// The first generation this publisher sends (a new work, or every
		// work after a restart): the source stored it long ago or is
		// storing it now, and OCM's retries a status of a work it does not
		// hold yet.
		p.resent[uid] = t.w.Generation
		return
	case last >= t.w.Generation:
		return
	default:
		p.resent[uid] = t.w.Generation
	}
	p.q.AddAfter(uid, lane(t.w), &pubTask{w: t.w, resend: true}, p.resend, nil)
}
