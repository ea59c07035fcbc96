package metrics_test

import (
	"errors"
	"strings"
	"testing"

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
