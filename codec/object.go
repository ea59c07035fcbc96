package codec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubetypes "k8s.io/apimachinery/pkg/types"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
)

// Object is what an ObjectCodec carries: a Kubernetes object, as a pointer
// to its struct.
type Object interface {
	metav1.Object
	runtime.Object
}

// ObjectCodec carries any Kubernetes object — a custom resource, or one of
// the types registration carries — as the object's JSON with its
// apiVersion and kind, so a type needs no codec of its own. Its data type is
// "<group>.<version>.<resource>" (the group as Kubernetes spells it, e.g.
// "cluster.open-cluster-management.io.v1.managedclusters"). The extensions
// are the protocol's: resourceid the UID, resourceversion the generation,
// clustername the namespace, deletiontimestamp on a deletion, and on status
// events originalsource. Spec events carry the object without its status,
// status events the whole object, of which the receiving source takes the
// status. Decode of a spec records the event's source in
// OriginalSourceAnnotation, whence Encode of a status takes it. It is
// goroutine-safe.
type ObjectCodec[T Object] struct {
	gvk      schema.GroupVersionKind
	dataType types.DataType
	newT     func() T
	status   int // index of T's field Status, -1 if none
	noun     string
}

var _ generic.Codec[Object] = (*ObjectCodec[Object])(nil)

// NewObjectCodec returns the codec of T, whose group, version and kind gvk
// gives and whose plural resource name is resource. T is a pointer to a
// struct that embeds metav1.TypeMeta and metav1.ObjectMeta.
func NewObjectCodec[T Object](gvk schema.GroupVersionKind, resource string) (*ObjectCodec[T], error) {
	var zero T
	typ := reflect.TypeOf(zero)
	if typ == nil || typ.Kind() != reflect.Pointer || typ.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("object codec: %v: want a pointer to a struct", typ)
	}
	dt := types.DataType{Group: gvk.Group, Version: gvk.Version, Resource: resource}
	if err := dt.Validate(); err != nil {
		return nil, fmt.Errorf("object codec of %v: data type %q: %w", gvk, dt, err)
	}
	c := &ObjectCodec[T]{gvk: gvk, dataType: dt, status: -1, noun: strings.ToLower(gvk.Kind),
		newT: func() T { return reflect.New(typ.Elem()).Interface().(T) }}
	if f, ok := typ.Elem().FieldByName("Status"); ok && len(f.Index) == 1 {
		c.status = f.Index[0]
	}
	return c, nil
}

// DataType implements generic.Codec.
func (c *ObjectCodec[T]) DataType() types.DataType { return c.dataType }

// Encode implements generic.Codec.
func (c *ObjectCodec[T]) Encode(source string, t types.EventType, obj T) (*cloudevents.Event, error) {
	evt, err := c.encode(source, t, obj)
	if err != nil {
		return nil, encodeError(t, obj, c.noun, err)
	}
	return evt, nil
}

// encodeError is err of encoding obj (which may be nil) as t, naming the
// object as noun.
func encodeError[T Object](t types.EventType, obj T, noun string, err error) *Error {
	e := newError("encode", t.String(), "", "", err)
	if any(obj) != nil && !reflect.ValueOf(obj).IsNil() {
		e.Work = obj.GetNamespace() + "/" + obj.GetName()
	}
	e.noun = noun
	return e
}

// decodeError is err of decoding evt (which may be nil or have no
// context), naming the object as noun.
func decodeError(evt *cloudevents.Event, noun string, err error) *Error {
	var typ, id string
	if evt != nil && evt.Context != nil && !reflect.ValueOf(evt.Context).IsNil() {
		typ, id = evt.Type(), evt.ID()
	}
	e := newError("decode", typ, id, "", err)
	e.noun = noun
	return e
}

// checkDecodable refuses a nil event or one without a context.
func checkDecodable(evt *cloudevents.Event) error {
	if evt == nil {
		return errors.New("event is nil")
	}
	if evt.Context == nil || reflect.ValueOf(evt.Context).IsNil() {
		return errors.New("event has no context")
	}
	return nil
}

func (c *ObjectCodec[T]) encode(source string, t types.EventType, obj T) (*cloudevents.Event, error) {
	if any(obj) == nil || reflect.ValueOf(obj).IsNil() {
		return nil, errors.New("object is nil")
	}
	evt, err := newEvent(c.dataType, source, t, obj)
	if err != nil {
		return nil, err
	}
	payload := c.shallow(obj)
	payload.GetObjectKind().SetGroupVersionKind(c.gvk)
	if t.SubResource == types.SubResourceSpec && c.status >= 0 {
		// The status is the agents': a spec leaves it out.
		f := reflect.ValueOf(payload).Elem().Field(c.status)
		f.Set(reflect.Zero(f.Type()))
	}
	if evt.DataEncoded, err = json.Marshal(payload); err != nil {
		return nil, atField("data", err)
	}
	return evt, nil
}

// shallow returns a shallow copy of obj, for what encode changes.
func (c *ObjectCodec[T]) shallow(obj T) T {
	out := c.newT()
	reflect.ValueOf(out).Elem().Set(reflect.ValueOf(obj).Elem())
	return out
}

// Decode implements generic.Codec.
func (c *ObjectCodec[T]) Decode(h types.Header, evt *cloudevents.Event) (T, error) {
	obj, err := c.decode(h, evt)
	if err != nil {
		var zero T
		return zero, decodeError(evt, c.noun, err)
	}
	return obj, nil
}

func (c *ObjectCodec[T]) decode(h types.Header, evt *cloudevents.Event) (T, error) {
	var zero T
	if err := checkDecodable(evt); err != nil {
		return zero, err
	}
	t, id, cluster, err := identity(h, evt, c.dataType)
	if err != nil {
		return zero, err
	}
	if !h.HasVersion {
		return zero, types.Missing(evt, types.ExtResourceVersion)
	}
	version := h.Version
	if version < 0 {
		return zero, atField("extension \"resourceversion\"", fmt.Errorf("%d is negative", version))
	}
	obj := c.newT()
	data := bytes.TrimSpace(evt.Data())
	if len(data) > 0 && string(data) != "null" {
		if err := json.Unmarshal(data, obj); err != nil {
			return zero, atField("data", jsonError(err))
		}
		if gvk := obj.GetObjectKind().GroupVersionKind(); !gvk.Empty() && gvk != c.gvk {
			return zero, atField("data", fmt.Errorf("apiVersion %q and kind %q, want %q and %q", gvk.GroupVersion(), gvk.Kind, c.gvk.GroupVersion(), c.gvk.Kind))
		}
	} else if t.SubResource == types.SubResourceStatus || t.Action != types.DeleteRequest {
		return zero, atField("data", fmt.Errorf("missing (a %s carries the %s)", t, c.noun))
	}
	// The extensions are the truth; the data only fills in.
	obj.GetObjectKind().SetGroupVersionKind(c.gvk)
	obj.SetUID(kubetypes.UID(id))
	obj.SetGeneration(version)
	obj.SetResourceVersion(strconv.FormatInt(version, 10))
	if cluster != "" {
		obj.SetNamespace(cluster)
	}
	if obj.GetName() == "" {
		obj.SetName(id)
	}
	if t.SubResource == types.SubResourceStatus {
		return obj, nil
	}
	source := evt.Source()
	if source == "" {
		return zero, atField("source", errors.New("empty (it is recorded as the object's original source)"))
	}
	obj.SetAnnotations(withSource(obj.GetAnnotations(), source))
	obj.SetDeletionTimestamp(deletionTimestamp(h, evt, obj.GetDeletionTimestamp()))
	return obj, nil
}
