// Package metrics adapts the generic clients' Observer to Prometheus. It
// registers on the registry you pass, never the global one, so several
// clients (or tests) in one process each get their own.
//
//	reg := prometheus.NewRegistry()
//	obs, err := metrics.NewObserver(reg)
//	client, err := generic.NewSourceClient(..., generic.WithObserver(obs))
//
// Counters:
//
//	workwire_events_received_total{side,data_type,subresource,action}
//	workwire_events_dropped_total{side,reason}
//	workwire_events_sent_total{side,data_type,subresource,action,result}
//	workwire_resyncs_answered_total{side,data_type}
//	workwire_resync_answer_events_total{side,data_type}
//	workwire_connects_total{side}
//	workwire_specs_resent_total{data_type}                 specs a source sent again, unacknowledged
//	workwire_deaf_subscriptions_total{side,subscription}   subscriptions found delivering nothing while connected
//
// Histograms:
//
//	workwire_send_duration_seconds{side,subresource}       the transport's send, until acknowledged
//	workwire_event_age_seconds{side,subresource}           receipt time minus the event's time attribute
//	workwire_resync_answer_duration_seconds{side}          first batch of a request to its answer sent
//	workwire_resync_answer_size_events{side}               events sent per answer
//	workwire_first_status_latency_seconds{data_type}       a spec's first send to the status that acknowledged it
//
// Gauges, summed over the clients and holders given to Track:
//
//	workwire_connected_clients{side}
//	workwire_queued_tasks{side}       received events and resyncs waiting for workers
//	workwire_held_resources{side}     where known: agents, and work holders' stores
//	workwire_unacknowledged_specs     specs sources sent that no status acknowledged yet
//	workwire_oldest_unacknowledged_spec_seconds  how long the oldest of them has waited
//	workwire_last_event_age_seconds{side,subscription}  since a subscription last delivered (the oldest over the clients)
//	workwire_deaf_subscription_clients{side,subscription}  clients whose subscription is deaf now
//
// Labels are bounded: no per-cluster or per-resource series.
//
// A rising workwire_events_dropped_total{reason="malformed"} or
// {reason="decode"} means a peer sends what this side cannot read;
// {reason="stale"} and {reason="out_of_order"} are normal under redelivery.
// workwire_connects_total rising means the connection to the broker keeps
// dropping. A workwire_deaf_subscriptions_total that rises means the broker
// (or something between) keeps a connection that stops delivering: every
// rise is a reconnect, and a resync after it. A workwire_unacknowledged_specs that stays up, or a rising
// workwire_specs_resent_total, means agents are away or their broker
// loses events.
package metrics

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

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
	sendDuration   *prometheus.HistogramVec
	eventAge       *prometheus.HistogramVec
	resyncDuration *prometheus.HistogramVec
	resyncSize     *prometheus.HistogramVec
	resent         *prometheus.CounterVec
	firstStatus    *prometheus.HistogramVec
	deaf           *prometheus.CounterVec
	gauges         *gauges
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
		sendDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "workwire", Name: "send_duration_seconds",
			Help:    "How long the transport took to send an event, until the broker acknowledged it where it does.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10), // 100µs to 26s
		}, []string{"side", "subresource"}),
		eventAge: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "workwire", Name: "event_age_seconds",
			Help:    "How old a received event was: receipt time minus its time attribute (the peer's clock).",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10), // 1ms to 4m
		}, []string{"side", "subresource"}),
		resyncDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "workwire", Name: "resync_answer_duration_seconds",
			Help:    "From the first batch of a resync request to its answer sent.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"side"}),
		resyncSize: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "workwire", Name: "resync_answer_size_events",
			Help:    "Events sent in answer to one resync request.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 10), // 1 to 262,144
		}, []string{"side"}),
		resent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "workwire", Name: "specs_resent_total",
			Help: "Specs a source sent again because their agent did not acknowledge them.",
		}, []string{"data_type"}),
		firstStatus: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "workwire", Name: "first_status_latency_seconds",
			Help:    "From a spec's first send to the first status at its version.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10), // 1ms to 4m
		}, []string{"data_type"}),
		deaf: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "workwire", Name: "deaf_subscriptions_total",
			Help: "Subscriptions found to deliver nothing while connected (a probe through them did not come back); each is reconnected.",
		}, []string{"side", "subscription"}),
		gauges: newGauges(),
	}
	for _, c := range []prometheus.Collector{o.received, o.dropped, o.sent, o.resyncs, o.resyncAnswered, o.connects,
		o.sendDuration, o.eventAge, o.resyncDuration, o.resyncSize, o.resent, o.firstStatus, o.deaf, o.gauges} {
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
	o.resyncSize.WithLabelValues(string(side)).Observe(float64(sent))
}

// SendDuration implements generic.Observer.
func (o *Observer) SendDuration(side generic.Side, t types.EventType, d time.Duration) {
	o.sendDuration.WithLabelValues(string(side), string(t.SubResource)).Observe(d.Seconds())
}

// EventAge implements generic.Observer.
func (o *Observer) EventAge(side generic.Side, t types.EventType, age time.Duration) {
	o.eventAge.WithLabelValues(string(side), string(t.SubResource)).Observe(age.Seconds())
}

// ResyncAnswerDuration implements generic.Observer.
func (o *Observer) ResyncAnswerDuration(side generic.Side, _ types.DataType, d time.Duration) {
	o.resyncDuration.WithLabelValues(string(side)).Observe(d.Seconds())
}

// SpecAcknowledged implements generic.Observer.
func (o *Observer) SpecAcknowledged(dt types.DataType, d time.Duration) {
	o.firstStatus.WithLabelValues(dt.String()).Observe(d.Seconds())
}

// SpecResent implements generic.Observer.
func (o *Observer) SpecResent(dt types.DataType) {
	o.resent.WithLabelValues(dt.String()).Inc()
}

// SubscriptionDeaf implements generic.Observer.
func (o *Observer) SubscriptionDeaf(side generic.Side, subscription string) {
	o.deaf.WithLabelValues(string(side), subscription).Inc()
}

// Track adds what stats returns — the Stats method of a generic client or a
// work holder — to the gauges of side, read at every scrape, until untrack
// is called.
func (o *Observer) Track(side generic.Side, stats func() generic.Stats) (untrack func()) {
	return o.gauges.track(side, stats)
}

// gauges is a collector of the tracked clients' Stats, summed per side.
type gauges struct {
	connected, queued, held, unacked, oldest, lastEvent, deaf *prometheus.Desc

	mu      sync.Mutex
	next    int
	tracked map[int]tracked
}

type tracked struct {
	side  generic.Side
	stats func() generic.Stats
}

func newGauges() *gauges {
	return &gauges{
		connected: prometheus.NewDesc("workwire_connected_clients", "Tracked clients connected to their broker.", []string{"side"}, nil),
		queued:    prometheus.NewDesc("workwire_queued_tasks", "Received events and resync tasks waiting for the tracked clients' workers.", []string{"side"}, nil),
		held:      prometheus.NewDesc("workwire_held_resources", "Resources the tracked clients hold, where they know.", []string{"side"}, nil),
		unacked:   prometheus.NewDesc("workwire_unacknowledged_specs", "Specs the tracked sources sent that no status acknowledged yet.", nil, nil),
		oldest:    prometheus.NewDesc("workwire_oldest_unacknowledged_spec_seconds", "How long the oldest spec no status acknowledged has waited.", nil, nil),
		lastEvent: prometheus.NewDesc("workwire_last_event_age_seconds", "Since the tracked clients' subscription last delivered an event or a probe: the oldest over the clients.", []string{"side", "subscription"}, nil),
		deaf:      prometheus.NewDesc("workwire_deaf_subscription_clients", "Tracked clients whose subscription delivers nothing while connected, now.", []string{"side", "subscription"}, nil),
		tracked:   make(map[int]tracked),
	}
}

func (g *gauges) track(side generic.Side, stats func() generic.Stats) func() {
	g.mu.Lock()
	defer g.mu.Unlock()
	id := g.next
	g.next++
	g.tracked[id] = tracked{side: side, stats: stats}
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		delete(g.tracked, id)
	}
}

// Describe implements prometheus.Collector.
func (g *gauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.connected
	ch <- g.queued
	ch <- g.held
	ch <- g.unacked
	ch <- g.oldest
	ch <- g.lastEvent
	ch <- g.deaf
}

// Collect implements prometheus.Collector.
func (g *gauges) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	all := slices.Collect(maps.Values(g.tracked))
	g.mu.Unlock()
	type sums struct {
		connected, queued, held float64
		knowsHeld               bool
	}
	bySide := map[generic.Side]*sums{}
	type subKey struct {
		side generic.Side
		sub  string
	}
	type subSums struct{ age, deaf float64 }
	bySub := map[subKey]*subSums{}
	now := time.Now()
	var unacked, oldest float64
	for _, t := range all {
		s := bySide[t.side]
		if s == nil {
			s = &sums{}
			bySide[t.side] = s
		}
		st := t.stats()
		if st.Connected {
			s.connected++
		}
		s.queued += float64(st.Queued)
		if st.Held >= 0 {
			s.held += float64(st.Held)
			s.knowsHeld = true
		}
		unacked += float64(st.Unacknowledged)
		oldest = max(oldest, st.OldestUnacknowledged.Seconds())
		for _, sub := range st.Subscriptions {
			k := subKey{t.side, sub.Subscription}
			ss := bySub[k]
			if ss == nil {
				ss = &subSums{}
				bySub[k] = ss
			}
			if !sub.LastEvent.IsZero() {
				ss.age = max(ss.age, now.Sub(sub.LastEvent).Seconds())
			}
			if sub.Deaf {
				ss.deaf++
			}
		}
	}
	for k, ss := range bySub {
		ch <- prometheus.MustNewConstMetric(g.lastEvent, prometheus.GaugeValue, ss.age, string(k.side), k.sub)
		ch <- prometheus.MustNewConstMetric(g.deaf, prometheus.GaugeValue, ss.deaf, string(k.side), k.sub)
	}
	ch <- prometheus.MustNewConstMetric(g.unacked, prometheus.GaugeValue, unacked)
	ch <- prometheus.MustNewConstMetric(g.oldest, prometheus.GaugeValue, oldest)
	for side, s := range bySide {
		ch <- prometheus.MustNewConstMetric(g.connected, prometheus.GaugeValue, s.connected, string(side))
		ch <- prometheus.MustNewConstMetric(g.queued, prometheus.GaugeValue, s.queued, string(side))
		if s.knowsHeld {
			ch <- prometheus.MustNewConstMetric(g.held, prometheus.GaugeValue, s.held, string(side))
		}
	}
}

// Connected implements generic.Observer.
func (o *Observer) Connected(side generic.Side) {
	o.connects.WithLabelValues(string(side)).Inc()
}
