// Package lifecycle holds what every long-running part of workwire does
// when it closes: wait for the goroutines it started, but no longer than
// the caller allows.
package lifecycle

import (
	"context"
	"sync"
)

// Wait returns nil once wg's count is zero, or ctx's error if ctx ends
// first; the goroutines go on winding down then, and nothing waits for
// them. No goroutine may take a wg entry once Wait is called.
func Wait(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
