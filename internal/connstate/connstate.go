// Package connstate tracks a transport's connection to its broker and
// keeps it up: the Tracker tells an operator what is going on at the
// default log level without flooding the log while a broker stays down, and
// answers health checks; Connect, Retry and Supervise are the one connect
// and reconnect loop every transport runs, with backoff.
package connstate

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/workwire/sdk-go/options"
)

// ReportInterval is how often, at most, a Tracker logs at the default level
// that connecting still fails.
const ReportInterval = 10 * time.Second

// Tracker follows one transport's connection. At the default level it logs
// that the transport is connecting, the first failure at once, then at most
// one line every ReportInterval with the attempts failed meanwhile, and the
// connection once it comes after failures; at V(2) it logs every attempt.
// It is goroutine-safe.
type Tracker struct {
	peer string
	now  func() time.Time

	mu        sync.Mutex
	log       logr.Logger
	closed    bool
	connected bool
	since     time.Time // the current state's start
	lastErr   error
	failed    int       // attempts failed since the last connection
	reported  time.Time // the last failure logged at the default level
	unlogged  int       // failures since then
}

// New returns a tracker of a connection to peer (such as "MQTT broker
// 127.0.0.1:1883"), not yet connected, logging to log.
func New(log logr.Logger, peer string) *Tracker {
	return &Tracker{log: log, peer: peer, now: time.Now, since: time.Now(), lastErr: fmt.Errorf("not started")}
}

// LoggerFrom returns the logger ctx carries, with values, and makes the
// tracker log to it from now on: a transport that was given no logger takes
// the one of its Start's context. Without one in ctx it returns current.
func (t *Tracker) LoggerFrom(ctx context.Context, current logr.Logger, values ...any) logr.Logger {
	l, err := logr.FromContext(ctx)
	if err != nil {
		return current
	}
	l = l.WithValues(values...)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.log = l
	return l
}

func (t *Tracker) logger() logr.Logger {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.log
}

// Connecting logs that the first connection begins.
func (t *Tracker) Connecting() {
	t.logger().Info("connecting", "to", t.peer)
}

// Failed records an attempt that failed with err, after which the
// transport waits retryIn.
func (t *Tracker) Failed(retryIn time.Duration, err error) {
	t.mu.Lock()
	now := t.now()
	t.failed++
	t.unlogged++
	t.lastErr = err
	failed, unlogged, log := t.failed, t.unlogged, t.log
	report := failed == 1 || now.Sub(t.reported) >= ReportInterval
	if report {
		t.reported, t.unlogged = now, 0
	}
	t.mu.Unlock()

	retryIn = retryIn.Round(time.Millisecond)
	log.V(2).Info("connect attempt failed", "to", t.peer, "attempt", failed, "retryIn", retryIn, "err", err)
	switch {
	case !report:
	case failed == 1:
		log.Info("cannot connect; retrying", "to", t.peer, "retryIn", retryIn, "err", err)
	default:
		log.Info("still cannot connect; retrying", "to", t.peer, "attemptsFailed", failed,
			"sinceLastReport", unlogged, "retryIn", retryIn, "err", err)
	}
}

// Connected records a connection, logged at the default level when attempts
// failed before it. While connected it does nothing.
func (t *Tracker) Connected() {
	t.mu.Lock()
	if t.connected {
		t.mu.Unlock()
		return
	}
	failed, log := t.failed, t.log
	t.connected, t.since, t.lastErr, t.failed, t.unlogged = true, t.now(), nil, 0, 0
	t.mu.Unlock()
	if failed > 0 {
		log.Info("connected", "to", t.peer, "afterFailedAttempts", failed)
		return
	}
	log.V(2).Info("connected", "to", t.peer)
}

// Lost records that the connection ended with err (nil if the transport
// cannot tell why). Only the first report of a loss counts, so a transport
// may report the cause where it sees it and again where it notices the
// end. It returns the cause it holds.
func (t *Tracker) Lost(err error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.connected {
		return t.lastErr
	}
	if err == nil {
		err = fmt.Errorf("connection lost")
	}
	t.connected, t.since, t.lastErr = false, t.now(), err
	return err
}

// Closed records that the transport was closed.
func (t *Tracker) Closed() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed, t.connected = true, false
}

// Healthy returns nil while connected; after Closed an error wrapping
// options.ErrClosed; otherwise one wrapping options.ErrNotConnected that
// says since when, how many attempts failed and the last error.
func (t *Tracker) Healthy() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.closed:
		return fmt.Errorf("connection to %s: %w", t.peer, options.ErrClosed)
	case t.connected:
		return nil
	}
	return fmt.Errorf("%w to %s since %s, %d attempts failed: %w",
		options.ErrNotConnected, t.peer, t.since.UTC().Format(time.RFC3339), t.failed, t.lastErr)
}
