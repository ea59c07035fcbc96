package connstate

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/workwire/sdk-go/options"
)

var fast = options.Backoff{Min: time.Millisecond, Max: 2 * time.Millisecond}

func TestConnectRetriesUntilItConnects(t *testing.T) {
	tr := New(logr.Discard(), "peer")
	attempts := 0
	got, err := Connect(context.Background(), tr, fast, func(context.Context) (int, error) {
		attempts++
		if attempts < 3 {
			return 0, errors.New("down")
		}
		return 42, nil
	}, nil)
	if err != nil || got != 42 || attempts != 3 {
		t.Fatalf("Connect = %d, %v after %d attempts", got, err, attempts)
	}
	if err := tr.Healthy(); err != nil {
		t.Errorf("Healthy after connecting: %v", err)
	}
}

func TestRetryStopsAtARefusalAndWhenItsContextEnds(t *testing.T) {
	refusal := errors.New("refused")
	tr := New(logr.Discard(), "peer")
	attempts := 0
	_, err := Retry(context.Background(), tr, fast, func(context.Context) (int, error) {
		attempts++
		return 0, refusal
	}, func(err error) bool { return errors.Is(err, refusal) })
	if !errors.Is(err, refusal) || attempts != 1 {
		t.Errorf("Retry of a refusal = %v after %d attempts, want the refusal after one", err, attempts)
	}

	ctx, cancel := context.WithCancel(context.Background())
	down := errors.New("down")
	_, err = Retry(ctx, tr, fast, func(context.Context) (int, error) {
		attempts++
		if attempts == 5 {
			cancel()
		}
		return 0, down
	}, nil)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, down) {
		t.Errorf("Retry once its context ended = %v, want it to wrap context.Canceled and the last failure", err)
	}
	if err := tr.Healthy(); !errors.Is(err, options.ErrNotConnected) || !errors.Is(err, down) {
		t.Errorf("Healthy = %v, want not connected, because of the last failure", err)
	}
}

// A connection that ends is replaced: the failed attempts in between are
// retried, and the receiver hears of the new connection.
func TestSuperviseReconnects(t *testing.T) {
	tr := New(logr.Discard(), "peer")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ends := make(chan error)         // ends the current connection
	reconnected := make(chan int, 1) // the connections Supervise hands over
	attempts, next := 0, 1
	done := make(chan struct{})
	go func() {
		defer close(done)
		Supervise(ctx, tr, fast, 0,
			func(int) error {
				select {
				case err := <-ends:
					return err
				case <-ctx.Done():
					return nil
				}
			},
			func(context.Context) (int, error) {
				attempts++
				if attempts%3 != 0 {
					return 0, errors.New("still down")
				}
				next++
				return next, nil
			},
			func(c int) { reconnected <- c })
	}()
	tr.Connected()
	for want := 2; want <= 3; want++ {
		ends <- errors.New("dropped")
		if got := <-reconnected; got != want {
			t.Fatalf("reconnected with connection %d, want %d", got, want)
		}
		if err := tr.Healthy(); err != nil {
			t.Errorf("Healthy after reconnecting: %v", err)
		}
	}
	cancel()
	<-done
	if attempts != 6 {
		t.Errorf("%d attempts for two reconnections that each failed twice first, want 6", attempts)
	}
}
