package bench

import (
	"sync/atomic"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
)

// clientCounts counts what the clients' logs would say, had the bench not
// discarded them: sends that failed, events skipped, specs sent again.
type clientCounts struct {
	generic.NopObserver
	sendsFailed, eventsDropped, specsResent atomic.Int64
}

func (c *clientCounts) EventSent(_ generic.Side, _ types.EventType, err error) {
	if err != nil {
		c.sendsFailed.Add(1)
	}
}

func (c *clientCounts) EventDropped(generic.Side, generic.DropReason) { c.eventsDropped.Add(1) }

func (c *clientCounts) SpecResent(types.DataType) { c.specsResent.Add(1) }
