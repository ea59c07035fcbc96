package codec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubetypes "k8s.io/apimachinery/pkg/types"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
)

// KubeCodec carries a Kubernetes object the way OCM's registration does
// over gRPC (ManagedClusters, CSRs, Leases, Events, add-ons), so that
// OCM's agents and hubs read what it writes. It differs from ObjectCodec
// where OCM's wire does:
//   - the version is the object's resourceVersion (a decimal string, as
//     the kube-apiserver gives it), not its generation: a CSR's certificate
//     or a Lease's renewal changes no generation;
//   - resourceid is the UID, absent while the object has none (an agent's
//     create_request of what the hub has not stored yet); on decode it may
//     also be the object's name, as OCM's programs of v1.2.0 write it;
//   - clustername is what clusterOf says the object belongs to (a
//     ManagedCluster's name, a CSR's cluster label, a Lease's namespace),
//     and originalsource is always present, empty;
//   - every event carries the whole object, status included, except a
//     deletion, which carries no data: its deletiontimestamp, resourceid
//     and resourceversion say it all.
//
// It is goroutine-safe.
type KubeCodec[T Object] struct {
	gvk       schema.GroupVersionKind
	dataType  types.DataType
	newT      func() T
	clusterOf func(T) string
	noun      string
}

// NewKubeCodec returns the codec of T, whose group, version and kind gvk
// gives and whose plural resource name is resource; clusterOf names the
// cluster an object belongs to. T is a pointer to a struct that embeds
// metav1.TypeMeta and metav1.ObjectMeta.
func NewKubeCodec[T Object](gvk schema.GroupVersionKind, resource string, clusterOf func(T) string) (*KubeCodec[T], error) {
	var zero T
	typ := reflect.TypeOf(zero)
	if typ == nil || typ.Kind() != reflect.Pointer || typ.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("kube codec: %v: want a pointer to a struct", typ)
	}
	if clusterOf == nil {
		return nil, fmt.Errorf("kube codec of %v: clusterOf is nil", gvk)
	}
	dt := types.DataType{Group: gvk.Group, Version: gvk.Version, Resource: resource}
	if err := dt.Validate(); err != nil {
		return nil, fmt.Errorf("kube codec of %v: data type %q: %w", gvk, dt, err)
	}
	return &KubeCodec[T]{gvk: gvk, dataType: dt, clusterOf: clusterOf, noun: strings.ToLower(gvk.Kind),
		newT: func() T { return reflect.New(typ.Elem()).Interface().(T) }}, nil
}

// DataType returns the data type the codec encodes and decodes.
func (c *KubeCodec[T]) DataType() types.DataType { return c.dataType }

// ClusterOf returns the cluster obj belongs to.
func (c *KubeCodec[T]) ClusterOf(obj T) string { return c.clusterOf(obj) }

// Version implements generic.Versioner: obj's resourceVersion, 0 while it
// has none.
func (c *KubeCodec[T]) Version(obj T) int64 {
	v, _ := strconv.ParseInt(obj.GetResourceVersion(), 10, 64)
	return v
}

var _ generic.Versioner[Object] = (*KubeCodec[Object])(nil)
var _ generic.Codec[Object] = (*KubeCodec[Object])(nil)

// Encode returns the event of type t for obj, from source.
func (c *KubeCodec[T]) Encode(source string, t types.EventType, obj T) (*cloudevents.Event, error) {
	evt, err := c.encode(source, t, obj)
	if err != nil {
		return nil, encodeError(t, obj, c.noun, err)
	}
	return evt, nil
}

func (c *KubeCodec[T]) encode(source string, t types.EventType, obj T) (*cloudevents.Event, error) {
	if any(obj) == nil || reflect.ValueOf(obj).IsNil() {
		return nil, errors.New("object is nil")
	}
	if err := checkType(c.dataType, t); err != nil {
		return nil, err
	}
	if source == "" {
		return nil, errors.New("source is empty")
	}
	cluster := c.clusterOf(obj)
	if cluster == "" {
		return nil, atField("clustername", fmt.Errorf("the %s names no cluster", c.noun))
	}
	version, err := kubeVersion(obj.GetResourceVersion())
	if err != nil {
		return nil, atField("metadata.resourceVersion", err)
	}
	t.DataType = c.dataType
	evt := cloudevents.New()
	evt.SetID(uuid.NewString())
	evt.SetSource(source)
	evt.SetType(t.String())
	evt.SetTime(time.Now())
	evt.SetExtension(types.ExtClusterName, cluster)
	evt.SetExtension(types.ExtOriginalSource, "")
	if uid := obj.GetUID(); uid != "" {
		evt.SetExtension(types.ExtResourceID, string(uid))
	}
	if version != "" {
		evt.SetExtension(types.ExtResourceVersion, version)
	}
	if ts := obj.GetDeletionTimestamp(); ts != nil {
		types.SetTimeExtension(&evt, types.ExtDeletionTimestamp, ts.Time)
		return &evt, nil
	}
	payload := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(T)
	reflect.ValueOf(payload).Elem().Set(reflect.ValueOf(obj).Elem())
	payload.GetObjectKind().SetGroupVersionKind(c.gvk)
	data, err := json.Marshal(payload)
	if err != nil {
		return nil, atField("data", err)
	}
	if err := evt.SetData(cloudevents.ApplicationJSON, data); err != nil {
		return nil, atField("data", err)
	}
	return &evt, nil
}

// kubeVersion checks a resourceVersion is what a kube-apiserver gives (a
// decimal number, or empty before it stored the object): OCM's peers
// compare versions as numbers.
func kubeVersion(rv string) (string, error) {
	if rv == "" {
		return "", nil
	}
	if n, err := strconv.ParseInt(rv, 10, 64); err != nil || n < 0 {
		return "", fmt.Errorf("%q is not a non-negative decimal number", rv)
	}
	return rv, nil
}

// Decode returns the object evt carries: the whole object, or of a
// deletion with no data, its UID, resourceVersion and deletion time.
func (c *KubeCodec[T]) Decode(h types.Header, evt *cloudevents.Event) (T, error) {
	obj, err := c.decode(h, evt)
	if err != nil {
		var zero T
		return zero, decodeError(evt, c.noun, err)
	}
	return obj, nil
}

func (c *KubeCodec[T]) decode(h types.Header, evt *cloudevents.Event) (T, error) {
	var zero T
	if err := checkDecodable(evt); err != nil {
		return zero, err
	}
	if err := checkType(c.dataType, h.Type); err != nil {
		return zero, err
	}
	id := h.ResourceID
	var version string
	if h.HasVersion {
		if h.Version < 0 {
			return zero, atField("extension \"resourceversion\"", fmt.Errorf("%d is negative", h.Version))
		}
		version = strconv.FormatInt(h.Version, 10)
	}
	deleted, isDeletion := h.Deletion, h.HasDeletion
	obj := c.newT()
	data := bytes.TrimSpace(evt.Data())
	if len(data) == 0 || string(data) == "null" {
		if !isDeletion {
			return zero, atField("data", fmt.Errorf("missing (only a deletion carries no %s)", c.noun))
		}
		if id == "" {
			return zero, atField("extension \"resourceid\"", errors.New("missing from a deletion, which names its object by it"))
		}
		obj.GetObjectKind().SetGroupVersionKind(c.gvk)
		obj.SetUID(kubetypes.UID(id))
		obj.SetResourceVersion(version)
		obj.SetDeletionTimestamp(&metav1.Time{Time: deleted})
		return obj, nil
	}
	if err := json.Unmarshal(data, obj); err != nil {
		return zero, atField("data", jsonError(err))
	}
	if gvk := obj.GetObjectKind().GroupVersionKind(); !gvk.Empty() && gvk != c.gvk {
		return zero, atField("data", fmt.Errorf("apiVersion %q and kind %q, want %q and %q", gvk.GroupVersion(), gvk.Kind, c.gvk.GroupVersion(), c.gvk.Kind))
	}
	obj.GetObjectKind().SetGroupVersionKind(c.gvk)
	switch {
	case id == "" || string(obj.GetUID()) == id:
	case id == obj.GetName():
		// OCM's programs of v1.2.0 (sdk-go v1.2.0) name the object in
		// resourceid rather than give its UID: the UID is the payload's.
	case obj.GetUID() != "":
		return zero, atField("extension \"resourceid\"", fmt.Errorf("%q, but the %s's uid is %q and its name %q", id, c.noun, obj.GetUID(), obj.GetName()))
	default:
		obj.SetUID(kubetypes.UID(id))
	}
	if _, err := kubeVersion(obj.GetResourceVersion()); err != nil {
		return zero, atField("data: metadata.resourceVersion", err)
	}
	if isDeletion && obj.GetDeletionTimestamp() == nil {
		obj.SetDeletionTimestamp(&metav1.Time{Time: deleted})
	}
	return obj, nil
}
