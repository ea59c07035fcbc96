package connstate

import (
	"context"
	"fmt"
	"time"

	"github.com/workwire/sdk-go/options"
)

// Connect is the first connection: Retry, between the tracker's
// Connecting and Connected.
func Connect[C any](ctx context.Context, t *Tracker, b options.Backoff, attempt func(context.Context) (C, error), refused func(error) bool) (C, error) {
	t.Connecting()
	conn, err := Retry(ctx, t, b, attempt, refused)
	if err == nil {
		t.Connected()
	}
	return conn, err
}

// Retry makes attempts until one succeeds, one fails in a way retrying
// cannot fix (refused), or ctx ends. t records each failure, b paces the
// attempts. It returns the result, the refusal as it is, or, once ctx
// ends, an error wrapping ctx's and the last failure.
func Retry[C any](ctx context.Context, t *Tracker, b options.Backoff, attempt func(context.Context) (C, error), refused func(error) bool) (C, error) {
	for n := 0; ; n++ {
		conn, err := attempt(ctx)
		if err == nil {
			return conn, nil
		}
		if refused != nil && refused(err) {
			return conn, err
		}
		delay := b.Delay(n)
		if ctx.Err() == nil {
			t.Failed(delay, err)
		}
		if !Sleep(ctx, delay) {
			return conn, fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
		}
	}
}

// Supervise keeps a connection up until ctx ends: it waits for conn to end
// (wait returns why, nil if it cannot tell), then connects again with
// backoff, and calls reconnected with each new connection. The attempt
// count carries over a connection that did not last b.Max: a peer that
// accepts and then drops at once (a client ID taken over, a subscription it
// ends) is retried ever more slowly, not every b.Min with a resync each
// time. wait must return once ctx ends.
func Supervise[C any](ctx context.Context, t *Tracker, b options.Backoff, conn C, wait func(C) error,
	attempt func(context.Context) (C, error), reconnected func(C)) {
	n, connectedAt := 0, time.Now()
	for {
		err := wait(conn)
		if ctx.Err() != nil {
			return
		}
		// The cause the transport reported when it saw it, if it did.
		t.logger().Info("connection lost; reconnecting", "to", t.peer, "err", t.Lost(err))
		if time.Since(connectedAt) >= b.Max {
			n = 0
		}
		// The delay a failure reports is the one the next attempt waits.
		for delay := b.Delay(n); ; {
			n++
			if !Sleep(ctx, delay) {
				return
			}
			next, err := attempt(ctx)
			if err != nil {
				delay = b.Delay(n)
				if ctx.Err() == nil {
					t.Failed(delay, err)
				}
				continue
			}
			conn, connectedAt = next, time.Now()
			break
		}
		t.Connected()
		t.logger().Info("reconnected", "to", t.peer)
		reconnected(conn)
	}
}

// Sleep waits d, or until ctx ends; it reports whether it waited d.
func Sleep(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}
