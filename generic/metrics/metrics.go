// Package metrics adapts the generic clients' Observer to Prometheus. It
// registers on the registry you pass, never the global one, so several
// clients (or tests) in one process each get their own.
//
//	reg := prometheus.NewRegistry()
//	obs, err := metrics.NewObserver(reg)
//	client, err := generic.NewSourceClient(..., generic.WithObserver(obs))
//
// Metrics (all counters):
//
//	workwire_events_received_total{side,data_type,subresource,action}
//	workwire_events_dropped_total{side,reason}
//	workwire_events_sent_total{side,data_type,subresource,action,result}
//	workwire_resyncs_answered_total{side,data_type}
//	workwire_resync_answer_events_total{side,data_type}
//	workwire_connects_total{side}
//
// A rising workwire_events_dropped_total{reason="malformed"} or
// {reason="decode"} means a peer sends what this side cannot read;
// {reason="stale"} and {reason="out_of_order"} are normal under redelivery.
// workwire_connects_total rising means the connection to the broker keeps
// dropping.
package metrics

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
)

// Observer records a client's counters as Prometheus metrics. It is
// goroutine-safe. One Observer may serve several clients: the side label
// tells sources from agents.
type Observer struct {
	received       *prometheus.CounterVec
	dropped        *prometheus.CounterVec
	sent           *prometheus.CounterVec
	resyncs        *prometheus.CounterVec
	resyncAnswered *prometheus.CounterVec
	connects       *prometheus.CounterVec
}

var _ generic.Observer = (*Observer)(nil)

// NewObserver registers the metrics on reg and returns the observer that
// feeds them. It fails if reg already holds metrics of these names.
func NewObserver(reg prometheus.Registerer) (*Observer, error) {
	if reg == nil {
		return nil, errors.New("metrics: registerer is nil")
	}
	o := &Observer{
		received: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "workwire", Name: "events_received_total",
			Help: "Well-formed events taken off the transport.",
		}, []string{"side", "data_type", "subresource", "action"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "workwire", Name: "events_dropped_total",
			Help: "Received events skipped, by reason (malformed, unexpected, unknown_data_type, decode, foreign, stale, out_of_order, handler).",
		}, []string{"side", "reason"}),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "workwire", Name: "events_sent_total",
			Help: "Events sent, by result (ok or error).",
		}, []string{"side", "data_type", "subresource", "action", "result"}),
		resyncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "workwire", Name: "resyncs_answered_total",
			Help: "Resync requests answered.",
		}, []string{"side", "data_type"}),
		resyncAnswered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "workwire", Name: "resync_answer_events_total",
			Help: "Events sent in answer to resync requests.",
		}, []string{"side", "data_type"}),
		connects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "workwire", Name: "connects_total",
			Help: "Connections to the broker made, the first and every reconnect.",
		}, []string{"side"}),
	}
	for _, c := range []prometheus.Collector{o.received, o.dropped, o.sent, o.resyncs, o.resyncAnswered, o.connects} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	return o, nil
}

// EventReceived implements generic.Observer.
func (o *Observer) EventReceived(side generic.Side, t types.EventType) {
	o.received.WithLabelValues(string(side), t.DataType.String(), string(t.SubResource), string(t.Action)).Inc()
}

// EventDropped implements generic.Observer.
func (o *Observer) EventDropped(side generic.Side, reason generic.DropReason) {
	o.dropped.WithLabelValues(string(side), string(reason)).Inc()
}

// EventSent implements generic.Observer.
func (o *Observer) EventSent(side generic.Side, t types.EventType, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	o.sent.WithLabelValues(string(side), t.DataType.String(), string(t.SubResource), string(t.Action), result).Inc()
}

// ResyncAnswered implements generic.Observer.
func (o *Observer) ResyncAnswered(side generic.Side, dt types.DataType, sent int) {
	o.resyncs.WithLabelValues(string(side), dt.String()).Inc()
	o.resyncAnswered.WithLabelValues(string(side), dt.String()).Add(float64(sent))
}

// Connected implements generic.Observer.
func (o *Observer) Connected(side generic.Side) {
	o.connects.WithLabelValues(string(side)).Inc()
}
