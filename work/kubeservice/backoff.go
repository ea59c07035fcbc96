package kubeservice

import (
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"

	"github.com/workwire/sdk-go/options"
)

// finalizeRetry paces the retries of a work's finalization: workwire's one
// backoff, as every other retry of the SDK.
var finalizeRetry = options.Backoff{Min: 100 * time.Millisecond, Max: 30 * time.Second}

// backoffLimiter is an options.Backoff as a workqueue rate limiter, per
// item: its nth retry waits b.Delay(n).
type backoffLimiter struct {
	b        options.Backoff
	mu       sync.Mutex
	failures map[string]int
}

var _ workqueue.TypedRateLimiter[string] = (*backoffLimiter)(nil)

func newBackoffLimiter(b options.Backoff) *backoffLimiter {
	return &backoffLimiter{b: b, failures: make(map[string]int)}
}

func (l *backoffLimiter) When(item string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.failures[item]
	l.failures[item] = n + 1
	return l.b.Delay(n)
}

func (l *backoffLimiter) Forget(item string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.failures, item)
}

func (l *backoffLimiter) NumRequeues(item string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failures[item]
}
