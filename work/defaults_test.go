package work_test

import (
	"testing"

	"github.com/workwire/sdk-go/internal/engine"
	"github.com/workwire/sdk-go/work"
)

// DefaultOrphanGracePeriod is written out in package work, for its
// documentation, and is the engine's, which package resource's holders
// use too.
func TestDefaultOrphanGracePeriodIsTheEngines(t *testing.T) {
	t.Parallel()
	if work.DefaultOrphanGracePeriod != engine.DefaultOrphanGracePeriod {
		t.Errorf("work.DefaultOrphanGracePeriod %v differs from the engine's %v", work.DefaultOrphanGracePeriod, engine.DefaultOrphanGracePeriod)
	}
}
