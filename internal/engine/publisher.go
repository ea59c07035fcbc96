package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"
	kubetypes "k8s.io/apimachinery/pkg/types"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/internal/queue"
	"github.com/workwire/sdk-go/options"
)

// publishAttempts bounds the retries of one publish. Past it, or at once
// when the transport is not connected, the object waits for the transport's
// next connect (publisher.connected); a source also sends it again when it
// goes unacknowledged (generic.WithSpecResend), and the peer's next resync
// finds it missing. Permanent errors (generic.Permanent) are not retried.
const publishAttempts = 8

// publishRetry paces them: 200ms doubling per attempt up to 30s, with
// jitter.
var publishRetry = options.Backoff{Min: 200 * time.Millisecond, Max: 30 * time.Second}

// publisher sends objects — specs on a hub, statuses on an agent — off the
// caller's goroutine, so a clientset write never waits for the broker. Per
// object only the newest snapshot waits (an older one is superseded);
// deletes have a lane of their own, so a delete storm never starves
// creates.
type publisher[T Object] struct {
	noun    string // what errors call an object: its kind, lower-case
	send    func(ctx context.Context, obj T) error
	log     logr.Logger
	onError generic.ErrorHandler
	retry   options.Backoff // publishRetry but in tests
	q       *queue.Queue[kubetypes.UID, *pubTask[T]]

	// resend, when set (an agent's WithStatusResend), sends an object again
	// this long after the first send of each of its later generations (not
	// the first this publisher sees), as latest has it then, and after its
	// last send, once latest no longer has it (an agent's Deleted status);
	// resent holds the generation last sent or scheduled per object, or
	// resentLast.
	resend time.Duration
	latest func(kubetypes.UID) (T, bool)
	mu     sync.Mutex
	resent map[kubetypes.UID]int64

	// parked holds, per object, the send that failed for want of a
	// connection, to go again at the transport's next connect; connects
	// counts the connects, so a send that failed just before one is not
	// parked past it. Both under mu.
	parked   map[kubetypes.UID]*pubTask[T]
	connects atomic.Uint64

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type pubTask[T Object] struct {
	obj     T                 // an immutable snapshot
	span    trace.SpanContext // the write's, parent of the send's; zero if none
	attempt int
	resend  bool // send the object as latest has it, or obj if latest no longer has it
}

// resentLast marks an object whose last send is scheduled again.
const resentLast = -1

func newPublisher[T Object](noun string, send func(context.Context, T) error, log logr.Logger, onError generic.ErrorHandler) *publisher[T] {
	ctx, cancel := context.WithCancel(context.Background())
	return &publisher[T]{
		noun:    noun,
		send:    send,
		log:     log,
		onError: onError,
		retry:   publishRetry,
		q:       queue.New[kubetypes.UID](2, newerTask[T]),
		parked:  make(map[kubetypes.UID]*pubTask[T]),
		ctx:     ctx,
		cancel:  cancel,
	}
}

// withResend makes p send an object again d after the first send of each
// of its generations but the first it sends, as latest then has it, and d
// after its last send, when latest no longer has it.
func (p *publisher[T]) withResend(d time.Duration, latest func(kubetypes.UID) (T, bool)) {
	p.resend, p.latest, p.resent = d, latest, make(map[kubetypes.UID]int64)
}

// newerTask keeps the snapshot with the higher resourceVersion (a resend
// carries the one it followed; it sends the latest).
func newerTask[T Object](old, new *pubTask[T]) (keep, discard *pubTask[T]) {
	if rv(new.obj) >= rv(old.obj) {
		return new, old
	}
	return old, new
}

func rv(obj Object) uint64 {
	n, _ := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
	return n
}

// enqueue queues obj to be published, as a child of the span of ctx. obj
// is a snapshot that must not change afterwards.
func (p *publisher[T]) enqueue(ctx context.Context, obj T) {
	p.mu.Lock()
	delete(p.parked, obj.GetUID()) // obj supersedes it, and must not be overtaken by it
	p.mu.Unlock()
	p.q.Add(obj.GetUID(), lane(obj), &pubTask[T]{obj: obj, span: trace.SpanContextFromContext(ctx)})
}

// connected queues again what waits for a connection. The client calls it
// after every connect of its transport (generic.ConnectionWatcher).
func (p *publisher[T]) connected() {
	p.mu.Lock()
	p.connects.Add(1)
	parked := p.parked
	p.parked = make(map[kubetypes.UID]*pubTask[T])
	p.mu.Unlock()
	if len(parked) > 0 {
		p.log.V(2).Info("connected; sending again what failed while away", p.noun+"s", len(parked))
	}
	for uid, t := range parked {
		p.q.Add(uid, lane(t.obj), &pubTask[T]{obj: t.obj, span: t.span, resend: t.resend})
	}
}

// park keeps t, whose send failed, for the transport's next connect, or
// queues it again now if one came since the send began (seen).
func (p *publisher[T]) park(uid kubetypes.UID, t *pubTask[T], seen uint64) {
	p.mu.Lock()
	if p.connects.Load() == seen {
		p.parked[uid] = t
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	p.q.Add(uid, lane(t.obj), &pubTask[T]{obj: t.obj, span: t.span, resend: t.resend})
}

func lane(obj Object) int {
	if obj.GetDeletionTimestamp() != nil {
		return 1
	}
	return 0
}

func (p *publisher[T]) start(workers int) {
	for range workers {
		p.wg.Add(1)
		go p.run()
	}
}

// stop drops what waits and returns once the workers are gone.
func (p *publisher[T]) stop() {
	p.cancel()
	p.q.ShutDown()
	p.wg.Wait()
}

func (p *publisher[T]) run() {
	defer p.wg.Done()
	for {
		uid, t, ok := p.q.Get()
		if !ok {
			return
		}
		if t.resend {
			if obj, ok := p.latest(uid); ok {
				t = &pubTask[T]{obj: obj, resend: true}
			}
		}
		ctx := p.ctx
		if t.span.IsValid() {
			ctx = trace.ContextWithSpanContext(ctx, t.span)
		}
		seen := p.connects.Load()
		err := p.send(ctx, t.obj)
		switch {
		case err == nil:
			p.scheduleResend(uid, t)
		case p.ctx.Err() != nil:
		case generic.Permanent(err):
			// Not retried, so it holds up nothing; only a new version of
			// the object can go out.
			p.onError(p.ctx, fmt.Errorf("publish %s %s: %w", p.noun, key(t.obj), err), "cannot publish it; not retried, it stays undelivered until it changes",
				p.noun, key(t.obj), "uid", t.obj.GetUID(), "generation", t.obj.GetGeneration())
		case p.q.Pending(uid):
			// A newer snapshot waits: it goes instead.
		case errors.Is(err, options.ErrNotConnected):
			p.log.V(2).Info("publish failed; sending it when the transport connects", p.noun, key(t.obj), "err", err)
			p.park(uid, t, seen)
		case t.attempt+1 < publishAttempts:
			t.attempt++
			d := p.retry.Delay(t.attempt - 1)
			p.log.V(2).Info("publish failed; retrying", p.noun, key(t.obj), "attempt", t.attempt, "after", d, "err", err)
			p.q.AddAfter(uid, lane(t.obj), t, d, nil)
		default:
			p.onError(p.ctx, fmt.Errorf("publish %s %s: %w", p.noun, key(t.obj), err), "publish failed; sent again at the transport's next connect, or by resync",
				p.noun, key(t.obj), "uid", t.obj.GetUID(), "generation", t.obj.GetGeneration())
			p.park(uid, t, seen)
		}
		p.q.Done(uid)
	}
}

// scheduleResend queues t's object to be sent again after p.resend, if t
// was the first send of a generation after the first one p sent, or the
// object's last send.
func (p *publisher[T]) scheduleResend(uid kubetypes.UID, t *pubTask[T]) {
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
		// The first generation this publisher sends (a new object, or
		// every object after a restart): the source stored it long ago or
		// is storing it now, and OCM's retries a status of an object it
		// does not hold yet.
		p.resent[uid] = t.obj.GetGeneration()
		return
	case last >= t.obj.GetGeneration():
		return
	default:
		p.resent[uid] = t.obj.GetGeneration()
	}
	p.q.AddAfter(uid, lane(t.obj), &pubTask[T]{obj: t.obj, resend: true}, p.resend, nil)
}

// key is obj's namespace/name.
func key(obj Object) string { return obj.GetNamespace() + "/" + obj.GetName() }
