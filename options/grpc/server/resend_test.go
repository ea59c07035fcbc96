package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc/grpctest"
	"github.com/workwire/sdk-go/options/grpc/server"
	"github.com/workwire/sdk-go/options/transporttest"
)

// acknowledged is a MemoryService whose agents acknowledge every spec
// with a status at its version, as work agents do.
type acknowledged struct{ *server.MemoryService }

func (acknowledged) AcknowledgesSpecs() bool { return true }

// gauge returns the value of an unlabelled gauge of reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && f.GetType() == dto.MetricType_GAUGE && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}

func deliveriesOf(r *transporttest.Recorder, resourceID string) int {
	n := 0
	for _, d := range r.Deliveries() {
		if id, _, _ := types.StringExtension(d.Event, types.ExtResourceID); d.Route.Role == options.RoleSpec && id == resourceID {
			n++
		}
	}
	return n
}

// A spec whose status never comes — lost on its way, or by the agent — is
// sent again until a status at its version does; a spec no agent connected
// here took is not waited for (the agent's spec resync brings it).
func TestTheServerSendsAnUnacknowledgedSpecAgain(t *testing.T) {
	reg := prometheus.NewRegistry()
	svc := acknowledged{server.NewMemoryService(dataType)}
	srv := grpctest.NewServerWithConfig(t, server.Config{SpecResendAfter: options.Duration(100 * time.Millisecond)},
		server.WithService(dataType, svc), server.WithRegisterer(reg))
	ctx := context.Background()
	const unacked = "grpc_server_ce_unacknowledged_specs"

	if err := svc.Put(ctx, specFromService("away", "cluster1", 1)); err != nil {
		t.Fatal(err)
	}
	if n := gauge(t, reg, unacked); n != 0 {
		t.Errorf("with no agent connected, %v specs wait for a status, want 0", n)
	}

	agent := newTransport(t, srv.Config())
	recv := mustStart(t, agent, options.AgentSubscriptions("cluster1", []string{dataType}))
	if err := svc.Put(ctx, specFromService("lost", "cluster1", 1)); err != nil {
		t.Fatal(err)
	}
	if n := gauge(t, reg, unacked); n != 1 {
		t.Errorf("%v specs wait for a status, want 1", n)
	}
	recv.Wait(t, "the spec sent again", 20*time.Second, func() bool { return deliveriesOf(recv, "lost") >= 2 })
	// Counted once routed: the agent can have it before the count.
	resent := `grpc_server_ce_specs_resent_total{data_type="` + dataType + `"}`
	recv.Wait(t, "the re-send counted", 20*time.Second, func() bool { return strings.Contains(scrape(t, reg), resent) })

	st := event("st", "status.update_request", map[string]string{types.ExtClusterName: "cluster1", types.ExtOriginalSource: server.DefaultSourceID})
	st.SetExtension(types.ExtResourceID, "lost")
	st.SetExtension(types.ExtResourceVersion, 1)
	if err := send(agent, options.Route{Role: options.RoleStatus, Source: server.DefaultSourceID, Cluster: "cluster1"}, st); err != nil {
		t.Fatal(err)
	}
	if n := gauge(t, reg, unacked); n != 0 {
		t.Errorf("after its status, %v specs wait for one, want 0", n)
	}
	body := scrape(t, reg)
	for _, want := range []string{
		resent,
		`grpc_server_ce_first_status_latency_seconds_count{data_type="` + dataType + `"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
}

// A Service that is no Acknowledger has nothing sent again: its agents'
// statuses do not say which spec they answer.
func TestAServiceWithoutAcknowledgementsIsNotWaitedFor(t *testing.T) {
	reg := prometheus.NewRegistry()
	svc := server.NewMemoryService(dataType)
	srv := grpctest.NewServerWithConfig(t, server.Config{SpecResendAfter: options.Duration(100 * time.Millisecond)},
		server.WithService(dataType, svc), server.WithRegisterer(reg))
	agent := newTransport(t, srv.Config())
	recv := mustStart(t, agent, options.AgentSubscriptions("cluster1", []string{dataType}))
	if err := svc.Put(context.Background(), specFromService("r1", "cluster1", 1)); err != nil {
		t.Fatal(err)
	}
	recv.Wait(t, "the spec", 10*time.Second, func() bool { return deliveriesOf(recv, "r1") == 1 })
	if n := gauge(t, reg, "grpc_server_ce_unacknowledged_specs"); n != 0 {
		t.Errorf("%v specs wait for a status, want 0", n)
	}
}
