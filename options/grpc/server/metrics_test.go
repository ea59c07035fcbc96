package server_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc/grpctest"
	"github.com/workwire/sdk-go/options/grpc/server"
)

// seed004Metric is one metric seed 004 lists: its name, type and labels.
type seed004Metric struct {
	name   string
	typ    dto.MetricType
	labels []string // sorted
}

var (
	rpcLabels = []string{"grpc_method", "grpc_service", "grpc_type"}
	ceLabels  = []string{"cluster", "data_type", "method"}
	withCode  = func(l []string) []string { return slices.Sorted(slices.Values(append(l[:len(l):len(l)], "grpc_code"))) }
)

var seed004Metrics = []seed004Metric{
	{"grpc_server_active_connections", dto.MetricType_GAUGE, []string{"local_addr", "remote_addr"}},
	{"grpc_server_started_total", dto.MetricType_COUNTER, rpcLabels},
	{"grpc_server_msg_received_total", dto.MetricType_COUNTER, rpcLabels},
	{"grpc_server_msg_sent_total", dto.MetricType_COUNTER, rpcLabels},
	{"grpc_server_msg_received_bytes_total", dto.MetricType_COUNTER, rpcLabels},
	{"grpc_server_msg_sent_bytes_total", dto.MetricType_COUNTER, rpcLabels},
	{"grpc_server_handled_total", dto.MetricType_COUNTER, withCode(rpcLabels)},
	{"grpc_server_handling_seconds", dto.MetricType_HISTOGRAM, rpcLabels},
	{"grpc_server_ce_called_total", dto.MetricType_COUNTER, ceLabels},
	{"grpc_server_ce_msg_received_total", dto.MetricType_COUNTER, ceLabels},
	{"grpc_server_ce_msg_sent_total", dto.MetricType_COUNTER, ceLabels},
	{"grpc_server_ce_processed_total", dto.MetricType_COUNTER, withCode(ceLabels)},
	{"grpc_server_ce_processed_duration_seconds", dto.MetricType_HISTOGRAM, withCode(ceLabels)},
}

func scrape(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	h := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer h.Close()
	resp, err := http.Get(h.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

func TestMetricsEndpointHasEverySeedMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	srv := grpctest.NewServer(t, server.WithRegisterer(reg))
	// A second server in the same process, on its own registry.
	reg2 := prometheus.NewRegistry()
	grpctest.NewServer(t, server.WithRegisterer(reg2))

	agent := newTransport(t, srv.Config())
	recv := mustStart(t, agent, options.AgentSubscriptions("cluster1", []string{dataType}))
	hub := newTransport(t, srv.Config())
	mustStart(t, hub, options.SourceSubscriptions("hub", []string{dataType}))
	spec := event("m1", "spec.create_request", map[string]string{types.ExtClusterName: "cluster1"})
	if err := send(hub, options.Route{Role: options.RoleSpec, Source: "hub", Cluster: "cluster1"}, spec); err != nil {
		t.Fatal(err)
	}
	recv.Wait(t, "the spec", 10*time.Second, func() bool { return find(recv, "m1") })

	// gRPC reports a call's end (handled, handling seconds) to the stats
	// handler after the client already has its answer.
	const publishHandled = `grpc_server_handled_total{grpc_code="OK",grpc_method="Publish",grpc_service="io.cloudevents.v1.CloudEventService",grpc_type="unary"} 1`
	body := scrape(t, reg)
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(body, publishHandled) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		body = scrape(t, reg)
	}
	for _, m := range seed004Metrics {
		if !strings.Contains(body, "\n# TYPE "+m.name+" "+strings.ToLower(m.typ.String())+"\n") {
			t.Errorf("scrape lacks metric %s of type %s", m.name, m.typ)
		}
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	gathered := map[string]*dto.MetricFamily{}
	for _, f := range families {
		gathered[f.GetName()] = f
	}
	for _, m := range seed004Metrics {
		f := gathered[m.name]
		if f == nil {
			continue // reported above
		}
		if f.GetType() != m.typ {
			t.Errorf("%s is a %s, want %s", m.name, f.GetType(), m.typ)
		}
		for _, series := range f.GetMetric() {
			var names []string
			for _, l := range series.GetLabel() {
				names = append(names, l.GetName())
			}
			slices.Sort(names)
			if !slices.Equal(names, m.labels) {
				t.Errorf("%s has labels %v, want %v", m.name, names, m.labels)
			}
		}
	}
	for _, want := range []string{
		`grpc_server_started_total{grpc_method="Publish",grpc_service="io.cloudevents.v1.CloudEventService",grpc_type="unary"} 1`,
		`grpc_server_started_total{grpc_method="Subscribe",grpc_service="io.cloudevents.v1.CloudEventService",grpc_type="server_stream"} 2`,
		publishHandled,
		`grpc_server_ce_called_total{cluster="cluster1",data_type="` + dataType + `",method="Publish"} 1`,
		`grpc_server_ce_called_total{cluster="cluster1",data_type="` + dataType + `",method="Subscribe"} 1`,
		`grpc_server_ce_msg_sent_total{cluster="cluster1",data_type="` + dataType + `",method="Subscribe"} 1`,
		`grpc_server_ce_processed_total{cluster="cluster1",data_type="` + dataType + `",grpc_code="OK",method="Publish"} 1`,
		// Message bytes, not gRPC frames: Publish answers are empty.
		`grpc_server_msg_sent_bytes_total{grpc_method="Publish",grpc_service="io.cloudevents.v1.CloudEventService",grpc_type="unary"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	if strings.Contains(scrape(t, reg2), "grpc_server_started_total{") {
		t.Error("the idle second server counted the first one's calls")
	}
	if _, err := server.New(server.Config{}, server.WithRegisterer(reg)); err == nil {
		t.Error("a second server on the same registry was accepted")
	}
}

// Refused callers cannot create time series: the cluster and data type
// labels are set only once a call is authorized, and refusals are counted
// by code alone.
func TestRefusedCallsCreateNoLabelledSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	b := newSecureBroker(t, server.WithRegisterer(reg))
	agent := b.agent(t, "agent-cluster1")
	mustStart(t, agent, options.AgentSubscriptions("cluster1", []string{dataType}))

	// Authenticated, not authorized: another cluster, invented data types.
	for i := range 3 {
		cluster, dt := fmt.Sprint("evil-cluster-", i), fmt.Sprint("io.evil", i, ".v1.things")
		_, err := start(t, b.agent(t, "agent-cluster1"), options.AgentSubscriptions(cluster, []string{dt}))
		if status.Code(err) != codes.PermissionDenied {
			t.Fatalf("subscribing to %s: %v, want PermissionDenied", cluster, err)
		}
		evt := event(fmt.Sprint("evil", i), "status.update_request", map[string]string{types.ExtClusterName: cluster, types.ExtOriginalSource: "A"})
		evt.SetType(dt + ".status.update_request")
		err = send(agent, options.Route{Role: options.RoleStatus, Source: "A", Cluster: cluster}, evt)
		if status.Code(err) != codes.PermissionDenied {
			t.Fatalf("publishing for %s: %v, want PermissionDenied", cluster, err)
		}
	}
	// Not authenticated at all.
	forged := b.source(t, "forged-token")
	mustStart(t, forged, nil)
	evt := event("forged", "spec.create_request", map[string]string{types.ExtClusterName: "evil-cluster-forged"})
	evt.SetType("io.evilforged.v1.things.spec.create_request")
	if err := send(forged, options.Route{Role: options.RoleSpec, Source: "A", Cluster: "evil-cluster-forged"}, evt); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("publishing with a forged token: %v, want Unauthenticated", err)
	}
	// An authorized publish is labelled as before.
	own := event("own", "status.update_request", map[string]string{types.ExtClusterName: "cluster1", types.ExtOriginalSource: "A"})
	if err := send(agent, options.Route{Role: options.RoleStatus, Source: "A", Cluster: "cluster1"}, own); err != nil {
		t.Fatal(err)
	}

	// gRPC reports a call's end to the stats handler after the client
	// already has its answer: the refused subscriptions' count may lag.
	const refusedHandled = `grpc_server_handled_total{grpc_code="PermissionDenied",grpc_method="Subscribe",grpc_service="io.cloudevents.v1.CloudEventService",grpc_type="server_stream"} 3`
	body := scrape(t, reg)
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(body, refusedHandled) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		body = scrape(t, reg)
	}
	for _, line := range strings.Split(body, "\n") {
		if strings.Contains(line, "evil") {
			t.Errorf("a refused call created a series: %s", line)
		}
	}
	for _, want := range []string{
		`grpc_server_ce_processed_total{cluster="",data_type="",grpc_code="PermissionDenied",method="Publish"} 3`,
		`grpc_server_ce_processed_total{cluster="",data_type="",grpc_code="Unauthenticated",method="Publish"} 1`,
		`grpc_server_ce_processed_total{cluster="cluster1",data_type="` + dataType + `",grpc_code="OK",method="Publish"} 1`,
		`grpc_server_ce_called_total{cluster="cluster1",data_type="` + dataType + `",method="Subscribe"} 1`,
		refusedHandled,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
}
