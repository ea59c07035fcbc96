package codec_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/internal/testsupport/widget"
)

func widgetCodec(t *testing.T) *codec.ObjectCodec[*widget.Widget] {
	t.Helper()
	c, err := codec.NewObjectCodec[*widget.Widget](widget.GVK, widget.Resource)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func widgetEventType(sub types.SubResource, action types.Action) types.EventType {
	return types.EventType{DataType: types.DataType{Group: widget.GroupVersion.Group, Version: widget.GroupVersion.Version, Resource: widget.Resource},
		SubResource: sub, Action: action}
}

func hubWidget() *widget.Widget {
	return &widget.Widget{
		ObjectMeta: metav1.ObjectMeta{Name: "w1", Namespace: "cluster1", UID: "uid-1", Generation: 3, Labels: map[string]string{"app": "demo"}},
		Spec:       widget.WidgetSpec{Color: "blue", Size: 2, Parts: []string{"a", "b"}},
		Status:     widget.WidgetStatus{Painted: "what the hub holds of the agent's report"},
	}
}

func TestObjectCodecCarriesSpecsAndStatuses(t *testing.T) {
	c := widgetCodec(t)
	if got := c.DataType().String(); got != "example.workwire.io.v1alpha1.widgets" {
		t.Errorf("data type %q", got)
	}
	evt, err := c.Encode("hub1", widgetEventType(types.SubResourceSpec, types.CreateRequest), hubWidget())
	if err != nil {
		t.Fatal(err)
	}
	var payload map[string]any
	if err := json.Unmarshal(evt.Data(), &payload); err != nil {
		t.Fatal(err)
	}
	if payload["apiVersion"] != "example.workwire.io/v1alpha1" || payload["kind"] != "Widget" {
		t.Errorf("spec payload without apiVersion and kind: %s", evt.Data())
	}
	if strings.Contains(string(evt.Data()), "painted") {
		t.Errorf("a spec event carries the status: %s", evt.Data())
	}
	got, err := generic.Decode(c, evt)
	if err != nil {
		t.Fatal(err)
	}
	want := hubWidget()
	want.TypeMeta = metav1.TypeMeta{APIVersion: "example.workwire.io/v1alpha1", Kind: "Widget"}
	want.ResourceVersion = "3"
	want.Status = widget.WidgetStatus{}
	want.Annotations = map[string]string{codec.OriginalSourceAnnotation: "hub1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decoded spec (-want +got):\n%s", diff)
	}

	// The agent reports; the source takes the status.
	got.Status = widget.WidgetStatus{Painted: "blue", Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Painted", LastTransitionTime: metav1.Now().Rfc3339Copy()}}}
	statusEvt, err := c.Encode("cluster1-agent", widgetEventType(types.SubResourceStatus, types.UpdateRequest), got)
	if err != nil {
		t.Fatal(err)
	}
	if src, _, _ := types.StringExtension(statusEvt, types.ExtOriginalSource); src != "hub1" {
		t.Errorf("originalsource %q, want hub1", src)
	}
	status, err := generic.Decode(c, statusEvt)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(got.Status, status.Status); diff != "" || status.UID != "uid-1" || status.Generation != 3 || status.Namespace != "cluster1" {
		t.Errorf("decoded status %v %d %s (-want +got):\n%s", status.UID, status.Generation, status.Namespace, diff)
	}
}

func TestObjectCodecDeletes(t *testing.T) {
	c := widgetCodec(t)
	w := hubWidget()
	now := metav1.Now().Rfc3339Copy()
	w.DeletionTimestamp = &now
	evt, err := c.Encode("hub1", widgetEventType(types.SubResourceSpec, types.DeleteRequest), w)
	if err != nil {
		t.Fatal(err)
	}
	got, err := generic.Decode(c, evt)
	if err != nil {
		t.Fatal(err)
	}
	if got.DeletionTimestamp == nil || !got.DeletionTimestamp.Equal(&now) || got.Name != "w1" {
		t.Errorf("decoded delete: %v %q", got.DeletionTimestamp, got.Name)
	}
	evt.SetData(cloudevents.ApplicationJSON, nil)
	if got, err := generic.Decode(c, evt); err != nil || got.DeletionTimestamp == nil || got.UID != "uid-1" {
		t.Errorf("a delete_request without data: %v, %v", got, err)
	}
}

func TestObjectCodecRefusesBadInput(t *testing.T) {
	c := widgetCodec(t)
	good := func(t *testing.T) *cloudevents.Event {
		evt, err := c.Encode("hub1", widgetEventType(types.SubResourceSpec, types.CreateRequest), hubWidget())
		if err != nil {
			t.Fatal(err)
		}
		return evt
	}
	tests := []struct {
		name   string
		event  func(*testing.T) *cloudevents.Event
		want   string
		wantIs error
	}{
		{"a foreign data type", func(t *testing.T) *cloudevents.Event {
			evt := good(t)
			evt.SetType("io.open-cluster-management.works.v1alpha1.manifestbundles.spec.create_request")
			return evt
		}, "data type", codec.ErrUnsupportedType},
		{"no resourceid", func(t *testing.T) *cloudevents.Event {
			evt := good(t)
			evt.SetExtension(types.ExtResourceID, nil)
			return evt
		}, "resourceid", types.ErrExtension},
		{"another kind in the data", func(t *testing.T) *cloudevents.Event {
			evt := good(t)
			_ = evt.SetData(cloudevents.ApplicationJSON, map[string]any{"apiVersion": "v1", "kind": "ConfigMap"})
			return evt
		}, `kind "ConfigMap"`, nil},
		{"no data on a create", func(t *testing.T) *cloudevents.Event {
			evt := good(t)
			_ = evt.SetData(cloudevents.ApplicationJSON, nil)
			return evt
		}, "data: missing", nil},
		{"data that is not an object", func(t *testing.T) *cloudevents.Event {
			evt := good(t)
			evt.DataEncoded = []byte(`["a"]`)
			return evt
		}, "data:", nil},
		{"a negative resourceversion", func(t *testing.T) *cloudevents.Event {
			evt := good(t)
			evt.SetExtension(types.ExtResourceVersion, -1)
			return evt
		}, "negative", nil},
		{"no event", func(*testing.T) *cloudevents.Event { return nil }, "event is nil", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := generic.Decode(c, tt.event(t))
			// The header is the clients' to parse, the payload the codec's.
			var ce *codec.Error
			var de *generic.DecodeError
			if err == nil || !(errors.As(err, &ce) || errors.As(err, &de)) || !strings.Contains(err.Error(), tt.want) || (tt.wantIs != nil && !errors.Is(err, tt.wantIs)) {
				t.Fatalf("Decode error %v, want a *codec.Error or *generic.DecodeError containing %q", err, tt.want)
			}
		})
	}

	for name, encode := range map[string]func() error{
		"a nil object": func() error {
			_, err := c.Encode("hub1", widgetEventType(types.SubResourceSpec, types.CreateRequest), nil)
			return err
		},
		"a status of an object that came from no source": func() error {
			_, err := c.Encode("agent", widgetEventType(types.SubResourceStatus, types.UpdateRequest), hubWidget())
			return err
		},
		"an object without a UID": func() error {
			w := hubWidget()
			w.UID = ""
			_, err := c.Encode("hub1", widgetEventType(types.SubResourceSpec, types.CreateRequest), w)
			return err
		},
	} {
		var ce *codec.Error
		if err := encode(); !errors.As(err, &ce) {
			t.Errorf("Encode of %s: %v, want a *codec.Error", name, err)
		} else if ce.Work != "" && !strings.Contains(err.Error(), `of widget "cluster1/w1"`) {
			t.Errorf("Encode of %s: %v, want it to name the widget", name, err)
		}
	}
	if _, err := codec.NewObjectCodec[*widget.Widget](widget.GVK, "Not A Resource"); err == nil {
		t.Error("NewObjectCodec took a malformed resource name")
	}
}
