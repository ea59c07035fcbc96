package metrics_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/metrics"
	"github.com/workwire/sdk-go/generic/types"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestObserverRecords(t *testing.T) {
	reg := prometheus.NewRegistry()
	o, err := metrics.NewObserver(reg)
	if err != nil {
		t.Fatal(err)
	}
	dt := types.DataType{Group: "io.example", Version: "v1", Resource: "things"}
	et := types.EventType{DataType: dt, SubResource: types.SubResourceSpec, Action: types.CreateRequest}
	o.EventReceived(generic.SideAgent, et)
	o.EventDropped(generic.SideAgent, generic.DropMalformed)
	o.EventDropped(generic.SideAgent, generic.DropMalformed)
	o.EventSent(generic.SideSource, et, nil)
	o.EventSent(generic.SideSource, et, errors.New("boom"))
	o.ResyncAnswered(generic.SideSource, dt, 7)
	o.Connected(generic.SideAgent)

	want := `
# HELP workwire_events_dropped_total Received events skipped, by reason (malformed, unexpected, unknown_data_type, decode, foreign, stale, out_of_order, handler).
# TYPE workwire_events_dropped_total counter
workwire_events_dropped_total{reason="malformed",side="agent"} 2
# HELP workwire_resync_answer_events_total Events sent in answer to resync requests.
# TYPE workwire_resync_answer_events_total counter
workwire_resync_answer_events_total{data_type="io.example.v1.things",side="source"} 7
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "workwire_events_dropped_total", "workwire_resync_answer_events_total"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(reg, "workwire_events_sent_total"); n != 2 {
		t.Fatalf("%d sent series, want 2 (ok and error)", n)
	}
	if _, err := metrics.NewObserver(reg); err == nil {
		t.Fatal("registering twice on one registry succeeded")
	}
	if _, err := metrics.NewObserver(prometheus.NewRegistry()); err != nil {
		t.Fatalf("a second registry: %v", err)
	}
}

// The histograms observe what the clients report, and the gauges sum the
// tracked clients per side at each scrape, until they are untracked.
func TestHistogramsAndGauges(t *testing.T) {
	reg := prometheus.NewRegistry()
	o, err := metrics.NewObserver(reg)
	if err != nil {
		t.Fatal(err)
	}
	dt := types.DataType{Group: "io.example", Version: "v1", Resource: "things"}
	status := types.EventType{DataType: dt, SubResource: types.SubResourceStatus, Action: types.UpdateRequest}
	o.SendDuration(generic.SideAgent, status, 3*time.Millisecond)
	o.EventAge(generic.SideSource, status, 2*time.Second)
	o.ResyncAnswerDuration(generic.SideSource, dt, 40*time.Millisecond)
	o.ResyncAnswered(generic.SideSource, dt, 7)
	o.SpecAcknowledged(dt, 300*time.Millisecond)
	o.SpecResent(dt)
	o.SpecResent(dt)

	stats := generic.Stats{Connected: true, Queued: 4, Held: 10}
	o.Track(generic.SideAgent, func() generic.Stats { return stats })
	untrack := o.Track(generic.SideAgent, func() generic.Stats { return generic.Stats{Queued: 1, Held: -1} })
	o.Track(generic.SideSource, func() generic.Stats {
		return generic.Stats{Connected: true, Held: -1, Unacknowledged: 3, OldestUnacknowledged: 90 * time.Second}
	})

	want := `
# HELP workwire_connected_clients Tracked clients connected to their broker.
# TYPE workwire_connected_clients gauge
workwire_connected_clients{side="agent"} 1
workwire_connected_clients{side="source"} 1
# HELP workwire_held_resources Resources the tracked clients hold, where they know.
# TYPE workwire_held_resources gauge
workwire_held_resources{side="agent"} 10
# HELP workwire_queued_tasks Received events and resync tasks waiting for the tracked clients' workers.
# TYPE workwire_queued_tasks gauge
workwire_queued_tasks{side="agent"} 5
workwire_queued_tasks{side="source"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "workwire_connected_clients", "workwire_held_resources", "workwire_queued_tasks"); err != nil {
		t.Error(err)
	}
	acks := `
# HELP workwire_oldest_unacknowledged_spec_seconds How long the oldest spec no status acknowledged has waited.
# TYPE workwire_oldest_unacknowledged_spec_seconds gauge
workwire_oldest_unacknowledged_spec_seconds 90
# HELP workwire_specs_resent_total Specs a source sent again because their agent did not acknowledge them.
# TYPE workwire_specs_resent_total counter
workwire_specs_resent_total{data_type="io.example.v1.things"} 2
# HELP workwire_unacknowledged_specs Specs the tracked sources sent that no status acknowledged yet.
# TYPE workwire_unacknowledged_specs gauge
workwire_unacknowledged_specs 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(acks), "workwire_unacknowledged_specs", "workwire_oldest_unacknowledged_spec_seconds", "workwire_specs_resent_total"); err != nil {
		t.Error(err)
	}
	untrack()
	stats.Queued = 0
	want = strings.Replace(want, `workwire_queued_tasks{side="agent"} 5`, `workwire_queued_tasks{side="agent"} 0`, 1)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "workwire_connected_clients", "workwire_held_resources", "workwire_queued_tasks"); err != nil {
		t.Errorf("after untracking one: %v", err)
	}
	for name, count := range map[string]int{
		"workwire_send_duration_seconds": 1, "workwire_event_age_seconds": 1,
		"workwire_resync_answer_duration_seconds": 1, "workwire_resync_answer_size_events": 1,
		"workwire_first_status_latency_seconds": 1,
	} {
		if got := testutil.CollectAndCount(reg, name); got != count {
			t.Errorf("%s: %d series, want %d", name, got, count)
		}
	}
}
