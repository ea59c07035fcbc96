package resource_test

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/workwire/sdk-go/internal/testsupport/widget"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/memory"
	"github.com/workwire/sdk-go/resource"
)

// A custom resource over events: a hub creates a widget, its agent reports
// a status, and the hub's lister serves it. Over a real broker, pass an
// *mqtt.Config (or a Kafka or gRPC one) in place of the TransportFunc.
func Example() {
	scheme := runtime.NewScheme()
	_ = widget.AddToScheme(scheme) // all the widget-specific code there is
	broker := memory.NewBroker()
	transport := options.TransportFunc(func() (options.Transport, error) { return broker.Transport(), nil })

	hub, _ := resource.NewHolderBuilder[*widget.Widget, *widget.WidgetList](transport, scheme).
		WithSourceID("hub1").WithLogger(logr.Discard()).NewHolder()
	agent, _ := resource.NewHolderBuilder[*widget.Widget, *widget.WidgetList](transport, scheme).
		WithClusterName("cluster1").WithLogger(logr.Discard()).NewHolder()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_ = hub.Start(ctx)
	_ = agent.Start(ctx)
	defer func() { _ = hub.Close(ctx); _ = agent.Close(ctx) }()

	_, _ = hub.Resources("cluster1").Create(ctx, &widget.Widget{
		ObjectMeta: metav1.ObjectMeta{Name: "w1"},
		Spec:       widget.WidgetSpec{Color: "blue"},
	}, metav1.CreateOptions{})

	// The agent's side: wait for the widget, paint it, report it.
	var w *widget.Widget
	for w == nil {
		w, _ = agent.Lister("cluster1").Get("w1")
		time.Sleep(10 * time.Millisecond)
	}
	w = w.DeepCopy()
	w.Status.Painted = w.Spec.Color
	meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: "Painted", Status: metav1.ConditionTrue, Reason: "Painted"})
	_, _ = agent.Resources("cluster1").UpdateStatus(ctx, w, metav1.UpdateOptions{})

	for ctx.Err() == nil {
		if got, err := hub.Lister("cluster1").Get("w1"); err == nil && got.Status.Painted != "" {
			fmt.Println("the hub sees w1 painted", got.Status.Painted)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Output: the hub sees w1 painted blue
}
