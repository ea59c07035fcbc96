package generic

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/workwire/sdk-go/internal/lifecycle"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/internal/queue"
	"github.com/workwire/sdk-go/options"
)

// Lanes of the work queue: deletes never starve creates and updates, and
// resync work never starves either.
const (
	laneUpdate = iota
	laneDelete
	laneResync
	laneCount
)

type taskKind uint8

const (
	taskEvent         taskKind = iota + 1 // a received spec or status event
	taskResyncRequest                     // received resync request batches from one peer
	taskSendResync                        // send our own resync request
)

// task is one unit of work in the queue. Events for one resource share a key,
// so they merge (newest wins) and never run concurrently.
type task[T Object] struct {
	kind  taskKind
	lane  int
	route options.Route // resolved: Source and Cluster always set for events
	// received numbers the task's event in the order the client received
	// its events; a merged task keeps the number of the event it kept, a
	// resync request that of its first batch.
	received uint64

	// taskEvent
	evt      *cloudevents.Event
	h        types.Header // evt's, parsed once
	et       types.EventType
	codec    *codecOf[T] // of et.DataType
	deleting bool
	answer   bool // came as an OCM source's resync_response

	// taskResyncRequest: batches in arrival order.
	batches []*cloudevents.Event
	// taskResyncRequest, taskSendResync
	dataType types.DataType

	deliveries []*options.Delivery
	attempt    int
}

// done acknowledges every delivery the task carries.
func (t *task[T]) done() {
	for _, d := range t.deliveries {
		d.Done()
	}
	t.deliveries = nil
}

// newer reports whether event task a supersedes event task b.
func (a *task[T]) newer(b *task[T]) bool {
	if a.h.Version != b.h.Version {
		return a.h.Version > b.h.Version
	}
	if a.h.HasSequence && b.h.HasSequence && a.h.Sequence != b.h.Sequence {
		return a.h.Sequence > b.h.Sequence
	}
	// Same version: a deletion is never erased by a later non-deletion.
	if b.deleting && !a.deleting {
		return false
	}
	return true
}

// mergeTasks keeps one of two tasks queued under one key.
func mergeTasks[T Object](old, new *task[T]) (keep, discard *task[T]) {
	switch old.kind {
	case taskEvent:
		if new.newer(old) {
			new.attempt = 0
			return new, old
		}
		return old, new
	case taskResyncRequest:
		old.batches = append(old.batches, new.batches...)
		old.deliveries = append(old.deliveries, new.deliveries...)
		new.batches, new.deliveries = nil, nil
		return old, new
	default: // taskSendResync: identical requests
		return old, new
	}
}

// sideLogic is what differs between a source and an agent.
type sideLogic[T Object] interface {
	// classify turns a received event into a task, or says why it is dropped.
	classify(d *options.Delivery, h types.Header) (*task[T], DropReason, error)
	handleEvent(ctx context.Context, t *task[T]) error
	answerResync(ctx context.Context, peer string, dt types.DataType, batch *cloudevents.Event, received uint64) error
	requestResync(ctx context.Context, dt types.DataType) error
}

// dropError marks an event that was counted as dropped; it is not retried.
type dropError struct {
	reason DropReason
	err    error
}

func (e *dropError) Error() string { return fmt.Sprintf("dropped (%s): %v", e.reason, e.err) }
func (e *dropError) Unwrap() error { return e.err }

type clientState int

const (
	stateNew clientState = iota
	stateStarted
	stateClosed
)

// core is the machinery both clients share: the receive path, the work
// queue and its workers, periodic resync, sends, and shutdown.
type core[T Object] struct {
	side     Side
	id       string // source ID, or cluster name
	ceSource string // CloudEvents source attribute of what this side sends
	tr       options.Transport
	lister   Lister[T]
	hash     StatusHashGetter[T]
	codecs   *codecs[T]
	cfg      config
	log      logr.Logger
	limiter  *rate.Limiter
	tracer   trace.Tracer
	subs     []options.Subscription
	received atomic.Uint64 // events received so far, to number them (task.received)
	logic    sideLogic[T]
	q        *queue.Queue[string, *task[T]]
	hear     *hearing // nil with the delivery check off
	// loops run from Start until Close, beside the workers.
	loops []func(ctx context.Context)

	mu        sync.Mutex // guards state, ready, startErr, startedAt and handlers before Start
	state     clientState
	ready     bool  // the transport's Start returned nil
	startErr  error // why Start failed, closing the client
	startedAt time.Time
	handlers  []ResourceHandler[T]

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newCore[T Object](side Side, id string, tr options.Transport, lister Lister[T], hash StatusHashGetter[T], cs []Codec[T], cfg config) (*core[T], error) {
	var errs []error
	if err := options.ValidateID(string(side)+" ID", id); err != nil {
		errs = append(errs, err)
	}
	if id == options.ProbePeer {
		errs = append(errs, fmt.Errorf("%s ID %q is the peer of probes (options.ProbePeer): no client may take it", side, id))
	}
	if tr == nil {
		errs = append(errs, errors.New("transport is nil"))
	}
	if lister == nil {
		errs = append(errs, errors.New("lister is nil"))
	}
	if hash == nil {
		errs = append(errs, errors.New("status hash getter is nil"))
	}
	reg, err := newCodecs(cs)
	if err != nil {
		errs = append(errs, err)
	}
	if err := cfg.validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("new %s client: %w", side, errors.Join(errs...))
	}
	c := &core[T]{
		side:     side,
		id:       id,
		ceSource: id,
		tr:       tr,
		lister:   lister,
		hash:     hash,
		codecs:   reg,
		cfg:      cfg,
		log:      cfg.logger.WithValues("side", side, "id", id),
		q:        queue.New[string, *task[T]](laneCount, mergeTasks[T]),
	}
	tp := cfg.tracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	c.tracer = tp.Tracer(TracerName)
	if cfg.deliveryCheck > 0 {
		c.hear = newHearing(side, cfg.deliveryCheck, tr, cfg.observer)
	}
	if cfg.publishQPS > 0 {
		c.limiter = rate.NewLimiter(rate.Limit(cfg.publishQPS), cfg.publishBurst)
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.ctx = logr.NewContext(c.ctx, c.log)
	return c, nil
}

func (c *core[T]) subscribe(handlers []ResourceHandler[T]) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.state {
	case stateStarted:
		return ErrStarted
	case stateClosed:
		return ErrClosed
	}
	for i, h := range handlers {
		if h == nil {
			return fmt.Errorf("subscribe: handlers[%d] is nil", i)
		}
	}
	c.handlers = append(c.handlers, handlers...)
	return nil
}

func (c *core[T]) start(ctx context.Context) error {
	c.mu.Lock()
	switch c.state {
	case stateStarted:
		c.mu.Unlock()
		return ErrStarted
	case stateClosed:
		c.mu.Unlock()
		return ErrClosed
	}
	if c.cfg.loggerSet {
		ctx = logr.NewContext(ctx, c.cfg.logger) // the transport's, unless it has its own
	} else if l, err := logr.FromContext(ctx); err == nil {
		c.log = l.WithValues("side", c.side, "id", c.id)
		c.ctx = logr.NewContext(c.ctx, c.log)
	}
	c.state = stateStarted
	c.startedAt = time.Now()
	c.mu.Unlock()

	for range c.cfg.workers {
		c.wg.Add(1)
		go c.worker()
	}
	if c.cfg.resyncInterval > 0 {
		c.wg.Add(1)
		go c.periodicResync()
	}
	for _, loop := range c.loops {
		c.wg.Go(func() { loop(c.ctx) })
	}
	if c.hear != nil {
		c.hear.watch(c.ceSource, c.subs)
		c.wg.Go(func() { c.hear.run(c.ctx, c.isReady, c.logger) })
	}
	c.log.V(2).Info("starting", "dataTypes", c.codecs.dataTypeNames())
	if err := c.tr.Start(ctx, c.subs, c); err != nil {
		err = fmt.Errorf("start %s client: %w", c.side, err)
		c.mu.Lock()
		c.startErr = err
		c.mu.Unlock()
		return errors.Join(err, c.close(context.Background()))
	}
	c.mu.Lock()
	c.ready = true
	c.mu.Unlock()
	c.log.Info("started")
	return nil
}

func (c *core[T]) close(ctx context.Context) error {
	c.mu.Lock()
	if c.state == stateClosed {
		c.mu.Unlock()
		return nil
	}
	c.state = stateClosed
	c.mu.Unlock()

	c.cancel()
	err := c.tr.Close(ctx)
	// Tasks still waiting are not acknowledged: a transport that commits
	// offsets redelivers them to the next consumer.
	c.q.ShutDown()
	if werr := lifecycle.Wait(ctx, &c.wg); werr != nil {
		return errors.Join(err, fmt.Errorf("close %s client: %w", c.side, werr))
	}
	c.log.Info("closed")
	return err
}

// isReady reports whether the transport's Start returned nil.
func (c *core[T]) isReady() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ready
}

// logger returns the client's logger.
func (c *core[T]) logger() logr.Logger {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.log
}

// healthy returns nil from a successful Start until Close while the
// transport, if it can tell (options.HealthChecker), is connected and no
// subscription is deaf.
func (c *core[T]) healthy() error {
	c.mu.Lock()
	state, ready, startErr := c.state, c.ready, c.startErr
	c.mu.Unlock()
	switch {
	case state == stateNew:
		return fmt.Errorf("%s client: %w", c.side, ErrNotStarted)
	case state == stateClosed && startErr != nil:
		return fmt.Errorf("%s client: %w by its failed Start, for good (a new client can start again): %w", c.side, ErrClosed, startErr)
	case state == stateClosed:
		return fmt.Errorf("%s client: %w", c.side, ErrClosed)
	}
	if hc, ok := c.tr.(options.HealthChecker); ok {
		if err := hc.Healthy(); err != nil {
			return fmt.Errorf("%s client: %w", c.side, err)
		}
	}
	if !ready {
		return fmt.Errorf("%s client: %w: starting", c.side, options.ErrNotConnected)
	}
	if c.hear != nil {
		if err := c.hear.healthy(); err != nil {
			return fmt.Errorf("%s client: %w", c.side, err)
		}
	}
	return nil
}

// resyncAnswered reports a resync request answered with sent events, whose
// first batch arrived at opened.
func (c *core[T]) resyncAnswered(dt types.DataType, sent int, opened time.Time) {
	c.cfg.observer.ResyncAnswered(c.side, dt, sent)
	c.cfg.observer.ResyncAnswerDuration(c.side, dt, time.Since(opened))
}

// stats returns the client's Stats; Held is -1.
func (c *core[T]) stats() Stats {
	s := Stats{Connected: c.healthy() == nil, Queued: c.q.Len(), Held: -1}
	if c.hear != nil {
		s.Subscriptions = c.hear.stats()
	}
	return s
}

// started returns when Start was called.
func (c *core[T]) started() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.startedAt
}

func (c *core[T]) checkStarted() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.state {
	case stateNew:
		return ErrNotStarted
	case stateClosed:
		return ErrClosed
	}
	return nil
}

// Deliver implements options.Receiver. It runs on the transport's receive
// goroutine, so it only parses the type and a few extensions and queues.
func (c *core[T]) Deliver(d *options.Delivery) {
	evt := d.Event
	if c.hear != nil {
		c.hear.hear(d.Route.Role)
	}
	if evt.Type() == options.ProbeType {
		d.Done() // it came back: that is all it was for
		return
	}
	if d.Route.Source == options.ProbePeer || d.Route.Cluster == options.ProbePeer {
		// A probe's route carries probes alone: whoever may write it
		// could otherwise pass anything off as a peer's.
		c.drop(DropForeign, &DecodeError{EventID: evt.ID(), EventType: evt.Type(), Err: fmt.Errorf("an event that is not a probe on a probe's route %v", d.Route)})
		d.Done()
		return
	}
	h, err := types.ParseHeader(evt)
	if err != nil {
		c.drop(DropMalformed, &DecodeError{EventID: evt.ID(), EventType: evt.Type(), Err: err})
		d.Done()
		return
	}
	c.cfg.observer.EventReceived(c.side, h.Type)
	if at := evt.Time(); !at.IsZero() {
		c.cfg.observer.EventAge(c.side, h.Type, time.Since(at))
	}
	t, reason, err := c.logic.classify(d, h)
	if reason != "" {
		c.drop(reason, &DecodeError{EventID: evt.ID(), EventType: evt.Type(), Err: err})
		d.Done()
		return
	}
	t.deliveries = append(t.deliveries, d)
	t.received = c.received.Add(1)
	var key string
	switch t.kind {
	case taskEvent:
		// Events merge and serialize per resource and peer: an event from
		// another peer naming the same resource (a misbehaving source) must
		// not supersede the owner's.
		key = "e/" + t.route.Source + "/" + t.route.Cluster + "/" + t.h.ResourceID
		if c.log.V(4).Enabled() {
			c.log.V(4).Info("received", "type", evt.Type(), "resourceID", t.h.ResourceID, "version", t.h.Version, "route", t.route)
		}
	case taskResyncRequest:
		key = "r/" + peerOf(t) + "/" + t.dataType.String()
		c.log.V(2).Info("received resync request", "type", evt.Type(), "route", t.route)
	}
	c.enqueue(key, t)
}

func peerOf[T Object](t *task[T]) string {
	if t.route.Role == options.RoleSpecResync {
		return t.route.Cluster
	}
	return t.route.Source
}

func (c *core[T]) enqueue(key string, t *task[T]) {
	discard, merged, accepted := c.q.Add(key, t.lane, t)
	if merged {
		discard.done()
	}
	_ = accepted // after shutdown nothing is acknowledged
}

// Malformed implements options.Receiver.
func (c *core[T]) Malformed(err error) {
	c.drop(DropMalformed, err)
}

// Connected implements options.Receiver: every (re)connect starts a resync,
// because events published while we were away are gone.
func (c *core[T]) Connected() {
	c.cfg.observer.Connected(c.side)
	c.log.V(2).Info("connected; resyncing")
	c.queueResync(types.DataType{})
	if w, ok := c.lister.(ConnectionWatcher); ok {
		if err := safely(func() error { w.Connected(); return nil }); err != nil {
			c.cfg.errorHandler(c.ctx, err, "the lister's Connected failed")
		}
	}
}

// queueResync queues a resync request for dt (zero: every data type).
// Requests for one data type that are already queued merge into one.
func (c *core[T]) queueResync(dt types.DataType) {
	cs, err := c.codecs.selectFor(dt)
	if err != nil {
		return
	}
	for _, codec := range cs {
		d := codec.dt
		c.enqueue("s/"+d.String(), &task[T]{kind: taskSendResync, lane: laneResync, dataType: d})
	}
}

func (c *core[T]) drop(reason DropReason, err error) {
	c.cfg.observer.EventDropped(c.side, reason)
	switch reason {
	case DropStale, DropOutOfOrder:
		// Expected under redelivery and resync; not worth anyone's attention.
		c.log.V(4).Info("dropped event", "reason", reason, "err", err)
	default:
		c.cfg.errorHandler(c.ctx, err, "dropped event", "side", c.side, "reason", reason)
	}
}

func (c *core[T]) worker() {
	defer c.wg.Done()
	for {
		key, t, ok := c.q.Get()
		if !ok {
			return
		}
		c.run(key, t)
		c.q.Done(key)
	}
}

func (c *core[T]) run(key string, t *task[T]) {
	err := safely(func() error { return c.runTask(t) })
	if err == nil {
		t.done()
		return
	}
	if c.ctx.Err() != nil {
		return // closing: leave it unacknowledged
	}
	if de := (*dropError)(nil); errors.As(err, &de) {
		c.drop(de.reason, de.err)
		t.done()
		return
	}
	if t.attempt < c.cfg.maxRetries && !c.q.Pending(key) {
		t.attempt++
		delay := taskRetry.Delay(t.attempt - 1)
		c.log.V(2).Info("retrying", "key", key, "attempt", t.attempt, "after", delay, "err", err)
		c.q.AddAfter(key, t.lane, t, delay, (*task[T]).done)
		return
	}
	if t.kind == taskEvent {
		c.cfg.observer.EventDropped(c.side, DropHandler)
	}
	c.cfg.errorHandler(c.ctx, err, "giving up", "side", c.side, "key", key, "attempts", t.attempt+1)
	t.done()
}

func (c *core[T]) runTask(t *task[T]) error {
	switch t.kind {
	case taskEvent:
		ctx, span := c.startProcess(c.ctx, t.et, t.evt)
		err := c.logic.handleEvent(ctx, t)
		endSpan(span, err)
		return err
	case taskResyncRequest:
		for len(t.batches) > 0 {
			if err := c.logic.answerResync(c.ctx, peerOf(t), t.dataType, t.batches[0], t.received); err != nil {
				return err
			}
			t.batches = t.batches[1:]
		}
		return nil
	case taskSendResync:
		return c.logic.requestResync(c.ctx, t.dataType)
	}
	return fmt.Errorf("unknown task kind %d", t.kind)
}

// safely runs fn and turns a panic into an error. Codecs, handlers and
// listers are the user's code, fed by the network: a panic in one must cost
// one event (which is retried, then dropped), not the process.
func safely(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	return fn()
}

// taskRetry paces the retries of a failed task: 100ms doubling per attempt
// up to 10s, with jitter.
var taskRetry = options.Backoff{Min: 100 * time.Millisecond, Max: 10 * time.Second}

func (c *core[T]) periodicResync() {
	defer c.wg.Done()
	for {
		// Up to 10% jitter, so a fleet that started together drifts apart.
		d := c.cfg.resyncInterval
		d -= rand.N(d/10 + 1)
		timer := time.NewTimer(d)
		select {
		case <-c.ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
			c.log.V(2).Info("periodic resync")
			c.queueResync(types.DataType{})
		}
	}
}

// callHandlers runs every handler in order; the first error stops them.
func (c *core[T]) callHandlers(ctx context.Context, et types.EventType, obj T) error {
	for _, h := range c.handlers {
		if err := h(ctx, et, obj); err != nil {
			return fmt.Errorf("handle %s: %w", et, err)
		}
	}
	return nil
}

// send sends one event and reports it.
func (c *core[T]) send(ctx context.Context, route options.Route, et types.EventType, evt *cloudevents.Event) error {
	began := time.Now()
	err := c.tr.Send(ctx, route, evt)
	c.cfg.observer.EventSent(c.side, et, err)
	if err != nil {
		return fmt.Errorf("send %s to %s/%s: %w", et, route.Source, route.Cluster, err)
	}
	c.cfg.observer.SendDuration(c.side, et, time.Since(began))
	if c.log.V(4).Enabled() {
		c.log.V(4).Info("sent", "type", evt.Type(), "id", evt.ID(), "route", route)
	}
	if c.log.V(5).Enabled() {
		c.log.V(5).Info("sent payload", "id", evt.ID(), "data", string(evt.Data()))
	}
	return nil
}

// maxEventBytes returns the transport's event size limit, 0 if it does not
// know one.
func (c *core[T]) maxEventBytes() int {
	if l, ok := c.tr.(options.EventSizeLimiter); ok {
		return l.MaxEventBytes()
	}
	return 0
}

// sendAnswer sends one resource's event of a resync answer, and reports
// whether it went out. An event the transport refuses as too large is
// reported and skipped: it fails the same way on every retry, and must not
// hold up the resources after it.
func (c *core[T]) sendAnswer(ctx context.Context, route options.Route, et types.EventType, evt *cloudevents.Event, resourceID string) (sent bool, err error) {
	err = c.send(ctx, route, et, evt)
	if errors.Is(err, options.ErrTooLarge) {
		c.cfg.errorHandler(c.ctx, err, "resource too large for the transport; skipped in the resync answer", "resourceID", resourceID)
		return false, nil
	}
	return err == nil, err
}

// publish is Publish's common path: rate limit, then send. The transport
// checks the event (options.CheckEvent), once.
func (c *core[T]) publish(ctx context.Context, route options.Route, et types.EventType, evt *cloudevents.Event) error {
	if err := c.checkStarted(); err != nil {
		return err
	}
	if c.limiter != nil {
		if err := c.limiter.Wait(ctx); err != nil {
			return fmt.Errorf("publish %s: rate limit: %w", et, err)
		}
	}
	ctx, span := c.startSend(ctx, et, evt)
	err := c.send(ctx, route, et, evt)
	endSpan(span, err)
	return err
}

// resync is Resync's common path.
func (c *core[T]) resync(ctx context.Context, dt types.DataType) error {
	if err := c.checkStarted(); err != nil {
		return err
	}
	cs, err := c.codecs.selectFor(dt)
	if err != nil {
		return err
	}
	var errs []error
	for _, codec := range cs {
		if err := c.logic.requestResync(ctx, codec.dt); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
