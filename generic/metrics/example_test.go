package metrics_test

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/metrics"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/memory"
	"github.com/workwire/sdk-go/work"
)

// The observer goes to a client as an option (here a hub holder's), and
// the metrics land on the registry given, which an HTTP handler serves
// (promhttp.HandlerFor(reg, promhttp.HandlerOpts{})).
func ExampleNewObserver() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reg := prometheus.NewRegistry()
	obs, err := metrics.NewObserver(reg)
	if err != nil {
		panic(err)
	}

	broker := memory.NewBroker()
	transport := work.TransportFunc(func() (options.Transport, error) { return broker.Transport(), nil })
	hub, err := work.NewClientHolderBuilder(transport).WithSourceID("hub1").WithLogger(logr.Discard()).
		WithSourceOptions(generic.WithObserver(obs)).NewClientHolder()
	if err != nil {
		panic(err)
	}
	agent, err := work.NewClientHolderBuilder(transport).WithClusterName("cluster1").WithLogger(logr.Discard()).NewClientHolder()
	if err != nil {
		panic(err)
	}
	for _, h := range []*work.ClientHolder{hub, agent} {
		if err := h.Start(ctx); err != nil {
			panic(err)
		}
		defer h.Close(context.Background())
	}

	w := &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "cluster1"}}
	if _, err := hub.WorkInterface().WorkV1().ManifestWorks("cluster1").Create(ctx, w, metav1.CreateOptions{}); err != nil {
		panic(err)
	}
	for ctx.Err() == nil {
		if _, err := agent.ManifestWorkInformer().Lister().ManifestWorks("cluster1").Get("web"); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	families, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, mf := range families {
		if mf.GetName() != "workwire_events_sent_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["action"] == "create_request" {
				fmt.Println(mf.GetName(), labels["side"], labels["action"], labels["result"], m.GetCounter().GetValue())
			}
		}
	}
	// Output: workwire_events_sent_total source create_request ok 1
}
