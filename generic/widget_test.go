package generic_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubetypes "k8s.io/apimachinery/pkg/types"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
)

// widget is the smallest resource a client can carry: its namespace is its
// cluster, an annotation names its source.
type widget struct {
	metav1.ObjectMeta
	Spec   string
	Status string
}

const sourceAnnotation = "test/source"

var widgets = types.DataType{Group: "io.example.widgets", Version: "v1", Resource: "widgets"}

func newWidget(source, cluster, name, spec string, gen int64) *widget {
	return &widget{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: cluster, UID: kubetypes.UID("uid-" + cluster + "-" + name), Generation: gen,
			Annotations: map[string]string{sourceAnnotation: source},
		},
		Spec: spec,
	}
}

func (w *widget) copy() *widget {
	c := *w
	c.ObjectMeta = *w.ObjectMeta.DeepCopy()
	return &c
}

type widgetCodec struct{}

func (widgetCodec) DataType() types.DataType { return widgets }

func (widgetCodec) Encode(source string, t types.EventType, w *widget) (*cloudevents.Event, error) {
	evt := cloudevents.New()
	evt.SetID(uuid.NewString())
	evt.SetSource(source)
	evt.SetType(t.String())
	evt.SetExtension(types.ExtResourceID, string(w.UID))
	if err := types.SetInt32Extension(&evt, types.ExtResourceVersion, w.Generation); err != nil {
		return nil, err
	}
	evt.SetExtension(types.ExtClusterName, w.Namespace)
	if w.DeletionTimestamp != nil {
		types.SetTimeExtension(&evt, types.ExtDeletionTimestamp, w.DeletionTimestamp.Time)
	}
	var payload any
	switch t.SubResource {
	case types.SubResourceSpec:
		if t.Action == types.DeleteRequest {
			return &evt, nil
		}
		payload = map[string]string{"name": w.Name, "spec": w.Spec}
	case types.SubResourceStatus:
		evt.SetExtension(types.ExtOriginalSource, w.Annotations[sourceAnnotation])
		payload = map[string]string{"status": w.Status}
	}
	if err := evt.SetData(cloudevents.ApplicationJSON, payload); err != nil {
		return nil, err
	}
	return &evt, nil
}

func (widgetCodec) Decode(h types.Header, evt *cloudevents.Event) (*widget, error) {
	t := h.Type
	if h.ResourceID == "" {
		return nil, types.Missing(evt, types.ExtResourceID)
	}
	w := &widget{ObjectMeta: metav1.ObjectMeta{UID: kubetypes.UID(h.ResourceID), Generation: h.Version, Namespace: h.ClusterName}}
	if h.HasDeletion {
		w.DeletionTimestamp = &metav1.Time{Time: h.Deletion}
	}
	var payload map[string]string
	if len(evt.Data()) > 0 {
		if err := json.Unmarshal(evt.Data(), &payload); err != nil {
			return nil, fmt.Errorf("data: %w", err)
		}
	}
	switch t.SubResource {
	case types.SubResourceSpec:
		w.Annotations = map[string]string{sourceAnnotation: evt.Source()}
		w.Name, w.Spec = payload["name"], payload["spec"]
	case types.SubResourceStatus:
		w.Status = payload["status"]
	}
	return w, nil
}

func hashWidget(w *widget) (string, error) {
	if w.Status == "" {
		return generic.NoStatus, nil
	}
	return generic.StatusHash(map[string]string{"status": w.Status})
}

// store is a goroutine-safe map of widgets that lists like a Lister.
type store struct {
	mu sync.Mutex
	m  map[string]*widget
}

func newStore(ws ...*widget) *store {
	s := &store{m: make(map[string]*widget)}
	for _, w := range ws {
		s.put(w)
	}
	return s
}

func (s *store) put(w *widget) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[string(w.UID)] = w.copy()
}

func (s *store) get(uid string) (*widget, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.m[uid]
	if !ok {
		return nil, false
	}
	return w.copy(), true
}

func (s *store) remove(uid string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, uid)
}

func (s *store) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

func (s *store) List(opts generic.ListOptions) ([]*widget, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*widget
	for _, w := range s.m {
		if opts.Source != "" && w.Annotations[sourceAnnotation] != opts.Source {
			continue
		}
		if opts.ClusterName != "" && w.Namespace != opts.ClusterName {
			continue
		}
		out = append(out, w.copy())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UID < out[j].UID })
	return out, nil
}

// refusingCodec is a codec of the caller's own that cannot encode.
type refusingCodec struct{ widgetCodec }

func (refusingCodec) Encode(string, types.EventType, *widget) (*cloudevents.Event, error) {
	return nil, errors.New("the codec's own reason")
}

// idlessCodec encodes events without an ID: not CloudEvents.
type idlessCodec struct{ widgetCodec }

func (c idlessCodec) Encode(source string, t types.EventType, w *widget) (*cloudevents.Event, error) {
	evt, err := c.widgetCodec.Encode(source, t, w)
	if err == nil {
		evt.SetID("")
	}
	return evt, err
}
