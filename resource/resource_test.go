package resource_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubetypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/internal/testsupport/widget"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/memory"
	"github.com/workwire/sdk-go/resource"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type holder = resource.Holder[*widget.Widget, *widget.WidgetList]

func scheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := widget.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func start(t *testing.T, b *resource.HolderBuilder[*widget.Widget, *widget.WidgetList]) *holder {
	t.Helper()
	quiet := generic.WithErrorHandler(func(context.Context, error, string, ...any) {})
	h, err := b.WithLogger(logr.Discard()).WithSourceOptions(quiet).WithAgentOptions(quiet).NewHolder()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := h.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	return h
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A custom resource of the tests' own goes hub client → agent informer →
// agent status → hub informer, is updated and deleted, with no code about
// its type but its scheme registration.
func TestACustomResourceRoundTrips(t *testing.T) {
	broker := memory.NewBroker()
	transport := options.TransportFunc(func() (options.Transport, error) { return broker.Transport(), nil })
	hub := start(t, resource.NewHolderBuilder[*widget.Widget, *widget.WidgetList](transport, scheme(t)).WithSourceID("hub1"))
	agent := start(t, resource.NewHolderBuilder[*widget.Widget, *widget.WidgetList](transport, scheme(t)).WithClusterName("cluster1"))
	ctx := context.Background()

	// An agent controller: paints what it is asked to, and reports it.
	_, err := agent.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { paint(t, agent, obj.(*widget.Widget)) },
		UpdateFunc: func(_, obj any) { paint(t, agent, obj.(*widget.Widget)) },
	})
	if err != nil {
		t.Fatal(err)
	}

	widgets := hub.Resources("cluster1")
	watcher, err := widgets.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Stop()
	created, err := widgets.Create(ctx, &widget.Widget{
		ObjectMeta: metav1.ObjectMeta{Name: "w1", Labels: map[string]string{"app": "demo"}},
		Spec:       widget.WidgetSpec{Color: "blue", Parts: []string{"wheel"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.UID == "" || created.Generation != 1 || created.Namespace != "cluster1" {
		t.Fatalf("created %+v", created.ObjectMeta)
	}
	if ev := <-watcher.ResultChan(); ev.Type != watch.Added || ev.Object.(*widget.Widget).Name != "w1" {
		t.Fatalf("the hub's watch got %v %T", ev.Type, ev.Object)
	}

	hubLister := hub.Lister("cluster1")
	paintedAs := func(color string, generation int64) func() bool {
		return func() bool {
			w, err := hubLister.Get("w1")
			if err != nil || w.Status.Painted != color {
				return false
			}
			c := meta.FindStatusCondition(w.Status.Conditions, "Painted")
			return c != nil && c.ObservedGeneration == generation
		}
	}
	eventually(t, "the hub's informer to see w1 painted blue", paintedAs("blue", 1))
	if got, err := agent.Lister("cluster1").Get("w1"); err != nil || got.Spec.Color != "blue" || got.Labels["app"] != "demo" || got.UID != created.UID {
		t.Fatalf("the agent holds %+v, %v", got, err)
	}

	list, err := widgets.List(ctx, metav1.ListOptions{LabelSelector: "app=demo"})
	if err != nil || len(list.Items) != 1 || list.Kind != "WidgetList" || list.ResourceVersion == "" {
		t.Fatalf("List = %+v, %v", list, err)
	}

	// A new spec, by a merge patch: a new generation, painted again.
	if _, err := widgets.Patch(ctx, "w1", kubetypes.MergePatchType, []byte(`{"spec":{"color":"red"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the hub's informer to see w1 painted red", paintedAs("red", 2))

	// The agent's client writes status, not spec; the hub's, not status.
	mine, _ := agent.Resources("cluster1").Get(ctx, "w1", metav1.GetOptions{})
	mine.Spec.Color = "green"
	if _, err := agent.Resources("cluster1").Update(ctx, mine, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("an agent's spec update: %v, want Forbidden", err)
	}
	if _, err := widgets.UpdateStatus(ctx, mine, metav1.UpdateOptions{}); !apierrors.IsMethodNotSupported(err) {
		t.Errorf("a hub's status update: %v, want MethodNotAllowed", err)
	}

	// Deletion: the agent lets it go, reports it Deleted, the hub forgets it.
	if err := widgets.Delete(ctx, "w1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "both sides to let w1 go", func() bool {
		_, hubErr := hubLister.Get("w1")
		_, agentErr := agent.Lister("cluster1").Get("w1")
		return apierrors.IsNotFound(hubErr) && apierrors.IsNotFound(agentErr)
	})
}

// paint is the agent controller's reconcile: it reports the color it was
// asked for, at the generation it saw.
func paint(t *testing.T, agent *holder, w *widget.Widget) {
	if w.DeletionTimestamp != nil {
		return
	}
	if c := meta.FindStatusCondition(w.Status.Conditions, "Painted"); c != nil && c.ObservedGeneration == w.Generation {
		return
	}
	w = w.DeepCopy() // the informer's object is read-only
	w.Status.Painted = w.Spec.Color
	meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: "Painted", Status: metav1.ConditionTrue, Reason: "Painted", ObservedGeneration: w.Generation})
	if _, err := agent.Resources(w.Namespace).UpdateStatus(context.Background(), w, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
		t.Errorf("update status: %v", err)
	}
}

func TestNewHolderRefusesWhatItCannotCarry(t *testing.T) {
	transport := options.TransportFunc(func() (options.Transport, error) { return memory.NewBroker().Transport(), nil })
	tests := []struct {
		name string
		b    interface{ err() error }
		want string
	}{
		{"no scheme", builder[*widget.Widget, *widget.WidgetList]{resource.NewHolderBuilder[*widget.Widget, *widget.WidgetList](transport, nil).WithSourceID("hub1")}, "no scheme"},
		{"a scheme without the type", builder[*widget.Widget, *widget.WidgetList]{resource.NewHolderBuilder[*widget.Widget, *widget.WidgetList](transport, runtime.NewScheme()).WithSourceID("hub1")}, "does not know"},
		{"a list type that is not the type's", builder[*widget.Widget, *metav1.Status]{resource.NewHolderBuilder[*widget.Widget, *metav1.Status](transport, scheme(t)).WithSourceID("hub1")}, "list type"},
		{"no transport", builder[*widget.Widget, *widget.WidgetList]{resource.NewHolderBuilder[*widget.Widget, *widget.WidgetList](nil, scheme(t)).WithSourceID("hub1")}, "no transport"},
		{"no role", builder[*widget.Widget, *widget.WidgetList]{resource.NewHolderBuilder[*widget.Widget, *widget.WidgetList](transport, scheme(t))}, "exactly one of"},
		{"a hub mirror", builder[*widget.Widget, *widget.WidgetList]{resource.NewHolderBuilder[*widget.Widget, *widget.WidgetList](transport, scheme(t)).WithSourceID("hub1").Mirror()}, "a mirror is an agent's"},
		{"a cluster name no hub can send to", builder[*widget.Widget, *widget.WidgetList]{resource.NewHolderBuilder[*widget.Widget, *widget.WidgetList](transport, scheme(t)).WithClusterName("Cluster1")}, `cluster name "Cluster1": it is the namespace of the cluster's objects on the hub`},
		{"a malformed resource name", builder[*widget.Widget, *widget.WidgetList]{resource.NewHolderBuilder[*widget.Widget, *widget.WidgetList](transport, scheme(t)).WithSourceID("hub1").WithResource("Wid gets")}, "data type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.b.err(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewHolder() error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

type builder[T resource.Object, L runtime.Object] struct {
	*resource.HolderBuilder[T, L]
}

func (b builder[T, L]) err() error {
	h, err := b.NewHolder()
	if err == nil {
		_ = h.Close(context.Background())
	}
	return err
}
