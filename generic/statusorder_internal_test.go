package generic

import "testing"

// A spec resync request forgets the marks above its sequence that an
// earlier run of the agent left, but not those of statuses received after
// it, which a worker may handle first: the request waits in a lane of its
// own.
func TestResyncForgetsOnlyMarksReceivedBeforeIt(t *testing.T) {
	o := statusOrder{m: make(map[string]map[string]statusMark)}
	applied := StatusOrder{Version: 1, Sequence: 300, HasSequence: true}
	earlier := StatusOrder{Version: 1, Sequence: 900, HasSequence: true} // a clock that was ahead
	o.record("c1", "sent-after-the-request", applied, 5)
	o.record("c1", "from-an-earlier-run", earlier, 1)

	o.resync("c1", 200, true, 3) // received third, handled after the status received fifth
	answer := StatusOrder{Version: 1, Sequence: 100, HasSequence: true}
	if !o.stale("c1", "sent-after-the-request", answer) {
		t.Error("an older status replaced one the agent sent after its resync request")
	}
	if o.stale("c1", "from-an-earlier-run", answer) {
		t.Error("a mark of an earlier run above the resync's sequence still drops the agent's statuses")
	}

	o.resync("c1", 0, false, 4) // an agent that tells no sequence
	if !o.stale("c1", "sent-after-the-request", answer) {
		t.Error("a resync without a sequence forgot a status received after it")
	}
	o.resync("c1", 0, false, 6)
	if o.stale("c1", "sent-after-the-request", answer) {
		t.Error("a resync without a sequence kept a mark received before it")
	}
}
