package server

import (
	"context"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/workwire/sdk-go/internal/ack"
)

// metrics are the server's Prometheus metrics: the general gRPC server ones
// and the CloudEvents ones (grpc_server_ce_*), as OCM's broker names them.
type metrics struct {
	activeConnections *prometheus.GaugeVec
	started           *prometheus.CounterVec
	msgReceived       *prometheus.CounterVec
	msgSent           *prometheus.CounterVec
	msgReceivedBytes  *prometheus.CounterVec
	msgSentBytes      *prometheus.CounterVec
	handled           *prometheus.CounterVec
	handlingSeconds   *prometheus.HistogramVec

	ceCalled            *prometheus.CounterVec
	ceMsgReceived       *prometheus.CounterVec
	ceMsgSent           *prometheus.CounterVec
	ceProcessed         *prometheus.CounterVec
	ceProcessedDuration *prometheus.HistogramVec
	handshakeFailures   *prometheus.CounterVec

	// Specs sent and not acknowledged (see Acknowledger).
	firstStatusLatency *prometheus.HistogramVec
	specsResent        *prometheus.CounterVec
	unacknowledged     prometheus.GaugeFunc
	oldestUnacked      prometheus.GaugeFunc
}

// newMetrics returns the server's metrics; acks, if not nil, feeds the
// gauges of unacknowledged specs.
func newMetrics(acks *ack.Tracker) *metrics {
	rpc := []string{"grpc_type", "grpc_service", "grpc_method"}
	ce := []string{"cluster", "data_type", "method"}
	counter := func(name, help string, labels []string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	return &metrics{
		activeConnections: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "grpc_server_active_connections", Help: "Current number of active connections.",
		}, []string{"local_addr", "remote_addr"}),
		started:          counter("grpc_server_started_total", "Total number of RPCs started on the server.", rpc),
		msgReceived:      counter("grpc_server_msg_received_total", "Total number of RPC messages received on the server.", rpc),
		msgSent:          counter("grpc_server_msg_sent_total", "Total number of gRPC messages sent by the server.", rpc),
		msgReceivedBytes: counter("grpc_server_msg_received_bytes_total", "Total number of message bytes received on the gRPC server.", rpc),
		msgSentBytes:     counter("grpc_server_msg_sent_bytes_total", "Total number of message bytes sent by the gRPC server.", rpc),
		handled: counter("grpc_server_handled_total", "Total number of RPCs completed on the server, regardless of success or failure.",
			append(rpc[:3:3], "grpc_code")),
		handlingSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "grpc_server_handling_seconds", Help: "Histogram of the duration of RPC handling by the gRPC server.",
			Buckets: prometheus.DefBuckets,
		}, rpc),
		ceCalled:      counter("grpc_server_ce_called_total", "Total number of RPC requests called on the server.", ce),
		ceMsgReceived: counter("grpc_server_ce_msg_received_total", "Total number of messages received on the gRPC server.", ce),
		ceMsgSent:     counter("grpc_server_ce_msg_sent_total", "Total number of messages sent by the gRPC server.", ce),
		ceProcessed: counter("grpc_server_ce_processed_total", "Total number of messages processed by the gRPC server.",
			append(ce[:3:3], "grpc_code")),
		ceProcessedDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "grpc_server_ce_processed_duration_seconds", Help: "Histogram of the duration of RPC requests for cloudevents processed on the server.",
			Buckets: prometheus.DefBuckets,
		}, append(ce[:3:3], "grpc_code")),
		handshakeFailures: counter("grpc_server_tls_handshake_failures_total",
			"Total number of TLS handshakes the server refused, by reason: expired (a client certificate expired or not yet valid), unknown_authority, or other.",
			[]string{"reason"}),
		firstStatusLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "grpc_server_ce_first_status_latency_seconds",
			Help:    "Histogram of the time from the server's first send of a spec's version to the first status that acknowledges it.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10), // 1ms to 4m, as workwire_first_status_latency_seconds
		}, []string{"data_type"}),
		specsResent: counter("grpc_server_ce_specs_resent_total", "Total number of specs the server sent again for want of a status acknowledging them.",
			[]string{"data_type"}),
		unacknowledged: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "grpc_server_ce_unacknowledged_specs", Help: "Number of specs the server sent that no status has acknowledged yet.",
		}, func() float64 {
			if acks == nil {
				return 0
			}
			n, _ := acks.Pending(time.Now())
			return float64(n)
		}),
		oldestUnacked: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "grpc_server_ce_oldest_unacknowledged_spec_seconds", Help: "Age of the oldest spec the server sent that no status has acknowledged yet.",
		}, func() float64 {
			if acks == nil {
				return 0
			}
			_, oldest := acks.Pending(time.Now())
			return oldest.Seconds()
		}),
	}
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{
		m.activeConnections, m.started, m.msgReceived, m.msgSent, m.msgReceivedBytes, m.msgSentBytes, m.handled, m.handlingSeconds,
		m.ceCalled, m.ceMsgReceived, m.ceMsgSent, m.ceProcessed, m.ceProcessedDuration, m.handshakeFailures,
		m.firstStatusLatency, m.specsResent, m.unacknowledged, m.oldestUnacked,
	}
}

func (m *metrics) register(r prometheus.Registerer) error {
	for _, c := range m.collectors() {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// statsHandler feeds the general gRPC metrics from gRPC's stats events.
type statsHandler struct{ m *metrics }

type rpcTagKey struct{}

type rpcTag struct {
	service, method string
	typ             string // set by Begin, read by the events after it
}

type connTagKey struct{}

type connTag struct{ local, remote string }

var _ stats.Handler = statsHandler{}

func (h statsHandler) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	name := strings.TrimPrefix(info.FullMethodName, "/")
	service, method := "unknown", name
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		service, method = name[:i], name[i+1:]
	}
	return context.WithValue(ctx, rpcTagKey{}, &rpcTag{service: service, method: method, typ: "unary"})
}

func (h statsHandler) HandleRPC(ctx context.Context, s stats.RPCStats) {
	tag, ok := ctx.Value(rpcTagKey{}).(*rpcTag)
	if !ok || s.IsClient() {
		return
	}
	switch s := s.(type) {
	case *stats.Begin:
		switch {
		case s.IsClientStream && s.IsServerStream:
			tag.typ = "bidi_stream"
		case s.IsClientStream:
			tag.typ = "client_stream"
		case s.IsServerStream:
			tag.typ = "server_stream"
		}
		h.m.started.WithLabelValues(tag.typ, tag.service, tag.method).Inc()
	// Bytes are the messages' own (Length), without gRPC's framing: an
	// empty Publish answer counts 0.
	case *stats.InPayload:
		h.m.msgReceived.WithLabelValues(tag.typ, tag.service, tag.method).Inc()
		h.m.msgReceivedBytes.WithLabelValues(tag.typ, tag.service, tag.method).Add(float64(s.Length))
	case *stats.OutPayload:
		h.m.msgSent.WithLabelValues(tag.typ, tag.service, tag.method).Inc()
		h.m.msgSentBytes.WithLabelValues(tag.typ, tag.service, tag.method).Add(float64(s.Length))
	case *stats.End:
		h.m.handled.WithLabelValues(tag.typ, tag.service, tag.method, status.Code(s.Error).String()).Inc()
		h.m.handlingSeconds.WithLabelValues(tag.typ, tag.service, tag.method).Observe(s.EndTime.Sub(s.BeginTime).Seconds())
	}
}

func (h statsHandler) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	t := &connTag{}
	if info.LocalAddr != nil {
		t.local = info.LocalAddr.String()
	}
	if info.RemoteAddr != nil {
		t.remote = info.RemoteAddr.String()
	}
	return context.WithValue(ctx, connTagKey{}, t)
}

func (h statsHandler) HandleConn(ctx context.Context, s stats.ConnStats) {
	t, ok := ctx.Value(connTagKey{}).(*connTag)
	if !ok || s.IsClient() {
		return
	}
	switch s.(type) {
	case *stats.ConnBegin:
		h.m.activeConnections.WithLabelValues(t.local, t.remote).Inc()
	case *stats.ConnEnd:
		h.m.activeConnections.DeleteLabelValues(t.local, t.remote)
	}
}

// ceLabels are the CloudEvents metrics' labels of one call.
type ceLabels struct{ cluster, dataType, method string }

func (m *metrics) ceCall(l ceLabels) {
	m.ceCalled.WithLabelValues(l.cluster, l.dataType, l.method).Inc()
}

func (m *metrics) ceReceived(l ceLabels) {
	m.ceMsgReceived.WithLabelValues(l.cluster, l.dataType, l.method).Inc()
}

func (m *metrics) ceSent(l ceLabels) {
	m.ceMsgSent.WithLabelValues(l.cluster, l.dataType, l.method).Inc()
}

func (m *metrics) ceDone(l ceLabels, err error, began time.Time) {
	code := status.Code(err).String()
	m.ceProcessed.WithLabelValues(l.cluster, l.dataType, l.method, code).Inc()
	m.ceProcessedDuration.WithLabelValues(l.cluster, l.dataType, l.method, code).Observe(time.Since(began).Seconds())
}
