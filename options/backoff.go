package options

import (
	"math/rand/v2"
	"time"
)

// Backoff is a capped exponential backoff with full jitter, for reconnect
// loops. Its zero value waits 100ms doubling to 30s.
type Backoff struct {
	// Min is the first delay ceiling. Default 100ms.
	Min time.Duration
	// Max caps every delay. Default 30s.
	Max time.Duration
}

// Delay returns how long to wait before attempt number attempt (0-based):
// a random duration between Min/2 and min(Max, Min·2^attempt), so a fleet of
// clients that lost the same broker does not reconnect in step.
func (b Backoff) Delay(attempt int) time.Duration {
	lo, hi := b.Min, b.Max
	if lo <= 0 {
		lo = 100 * time.Millisecond
	}
	if hi <= 0 {
		hi = 30 * time.Second
	}
	if hi < lo {
		hi = lo
	}
	ceil := lo
	for i := 0; i < attempt && ceil < hi; i++ {
		ceil *= 2
	}
	ceil = min(ceil, hi)
	floor := lo / 2
	return floor + rand.N(ceil-floor+1)
}
