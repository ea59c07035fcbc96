package generic_test

import (
	"testing"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/internal/ack"
)

// The spec re-send defaults are written out in generic, for its
// documentation, and are internal/ack's, which the gRPC broker uses too.
func TestSpecResendDefaultsAreAcks(t *testing.T) {
	t.Parallel()
	if generic.DefaultSpecResendAfter != ack.DefaultAfter || generic.SpecResendMax != ack.DefaultMax || generic.SpecResendPerRound != ack.DefaultPerRound {
		t.Errorf("generic's spec re-send defaults (%v, %v, %d) differ from internal/ack's (%v, %v, %d)",
			generic.DefaultSpecResendAfter, generic.SpecResendMax, generic.SpecResendPerRound, ack.DefaultAfter, ack.DefaultMax, ack.DefaultPerRound)
	}
}
