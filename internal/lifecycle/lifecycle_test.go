package lifecycle

import (
	"context"
	"errors"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestWait(t *testing.T) {
	var wg sync.WaitGroup
	release := make(chan struct{})
	wg.Go(func() { <-release })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Wait(ctx, &wg); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait with a goroutine running and its context ended = %v, want context.Canceled", err)
	}
	close(release)
	if err := Wait(context.Background(), &wg); err != nil {
		t.Errorf("Wait once the goroutine ended = %v", err)
	}
}
