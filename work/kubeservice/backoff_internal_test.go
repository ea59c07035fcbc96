package kubeservice

import (
	"testing"
	"time"

	"github.com/workwire/sdk-go/options"
)

func TestBackoffLimiterCountsPerItem(t *testing.T) {
	l := newBackoffLimiter(options.Backoff{Min: time.Second, Max: 4 * time.Second})
	for n := range 4 {
		d := l.When("a")
		if ceil := min(time.Second<<n, 4*time.Second); d < time.Second/2 || d > ceil {
			t.Errorf("retry %d of a waits %v, want %v to %v", n, d, time.Second/2, ceil)
		}
	}
	if l.NumRequeues("a") != 4 || l.NumRequeues("b") != 0 {
		t.Errorf("requeues a %d, b %d; want 4, 0", l.NumRequeues("a"), l.NumRequeues("b"))
	}
	l.Forget("a")
	if l.NumRequeues("a") != 0 {
		t.Error("Forget kept the count")
	}
}
