package kubeservice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/go-logr/logr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options/grpc/server"
)

// Service is a server.Service over a kube-apiserver for one of the types
// registration carries. It answers Get and List from an informer, tells
// the server of every change the informer sees — a deletion too, which its
// Get answers for a minute, so agents learn of it at once — and carries
// out what an agent asks through its type's policy (see the constructors).
type Service[T codec.Object] struct {
	codec    *codec.KubeCodec[T]
	sourceID string
	informer cache.SharedIndexInformer // nil for a type the hub never sends
	// as is an object of the informer as T: itself, or converted from the
	// version the informer holds.
	as func(obj any) (T, bool)
	// write carries out an agent's request: an event of a type the
	// policy allows, whose object belongs to the cluster it names.
	write func(ctx context.Context, id server.Identity, t types.EventType, obj T) error
	log   logr.Logger

	// gone are objects the informer saw deleted, for tombstoneTTL, so the
	// server's Get after OnDelete sends agents the deletion at once rather
	// than at their next spec resync.
	mu   sync.Mutex
	gone map[string]tombstone[T]
}

type tombstone[T any] struct {
	obj     T
	expires time.Time
}

// tombstoneTTL is how long a deleted object is remembered: long enough for
// every replica's handler to send it.
const tombstoneTTL = time.Minute

var _ server.Service = (*Service[codec.Object])(nil)

// Option configures a Service.
type Option func(*options)

type options struct{ log logr.Logger }

// WithLogger sets the Service's logger (default: discard).
func WithLogger(l logr.Logger) Option { return func(o *options) { o.log = l } }

// The informer indexes of a Service.
const (
	byUID     = "workwire-uid"
	byCluster = "workwire-cluster"
)

func newService[T codec.Object](c *codec.KubeCodec[T], sourceID string, informer cache.SharedIndexInformer,
	write func(context.Context, server.Identity, types.EventType, T) error, opts []Option) (*Service[T], error) {
	return newConvertingService(c, sourceID, informer, func(obj any) (T, bool) { o, ok := obj.(T); return o, ok }, write, opts)
}

// newConvertingService is newService over an informer of another version
// of T's kind, whose objects as converts to T.
func newConvertingService[T codec.Object](c *codec.KubeCodec[T], sourceID string, informer cache.SharedIndexInformer, as func(any) (T, bool),
	write func(context.Context, server.Identity, types.EventType, T) error, opts []Option) (*Service[T], error) {
	if sourceID == "" {
		return nil, errors.New("new service: sourceID is empty")
	}
	o := options{log: logr.Discard()}
	for _, opt := range opts {
		opt(&o)
	}
	s := &Service[T]{codec: c, sourceID: sourceID, informer: informer, as: as, write: write, log: o.log.WithValues("dataType", c.DataType().String()),
		gone: make(map[string]tombstone[T])}
	if informer == nil {
		return s, nil
	}
	// Services of two versions of a kind share one informer, and their
	// indexes: an object's UID and cluster are the same in every version.
	indexers := cache.Indexers{
		byUID: func(obj any) ([]string, error) {
			if o, ok := as(obj); ok {
				return []string{string(o.GetUID())}, nil
			}
			return nil, nil
		},
		byCluster: func(obj any) ([]string, error) {
			if o, ok := as(obj); ok {
				if cluster := c.ClusterOf(o); cluster != "" {
					return []string{cluster}, nil
				}
			}
			return nil, nil
		},
	}
	for name := range informer.GetIndexer().GetIndexers() {
		delete(indexers, name)
	}
	err := informer.AddIndexers(indexers)
	if err != nil {
		return nil, fmt.Errorf("new service of %s: index its informer (add a Service before the informer starts): %w", c.DataType(), err)
	}
	return s, nil
}

// Get implements server.Service.
func (s *Service[T]) Get(_ context.Context, resourceID string) (*cloudevents.Event, error) {
	if s.informer == nil {
		return nil, fmt.Errorf("%s %s: %w", s.codec.DataType(), resourceID, server.ErrNotFound)
	}
	objs, err := s.informer.GetIndexer().ByIndex(byUID, resourceID)
	if err != nil {
		return nil, err
	}
	if len(objs) == 0 {
		s.mu.Lock()
		t, ok := s.gone[resourceID]
		s.mu.Unlock()
		if ok && time.Now().Before(t.expires) {
			return s.encode(t.obj)
		}
		return nil, fmt.Errorf("%s %s: %w", s.codec.DataType(), resourceID, server.ErrNotFound)
	}
	o, ok := s.as(objs[0])
	if !ok {
		return nil, fmt.Errorf("%s %s: %w", s.codec.DataType(), resourceID, server.ErrNotFound)
	}
	return s.encode(o)
}

// List implements server.Service: the objects of opts.ClusterName.
func (s *Service[T]) List(_ context.Context, opts server.ListOptions) ([]*cloudevents.Event, error) {
	if s.informer == nil {
		return nil, nil
	}
	var objs []any
	var err error
	if opts.ClusterName == "" {
		objs = s.informer.GetIndexer().List()
	} else if objs, err = s.informer.GetIndexer().ByIndex(byCluster, opts.ClusterName); err != nil {
		return nil, err
	}
	out := make([]*cloudevents.Event, 0, len(objs))
	for _, obj := range objs {
		o, ok := s.as(obj)
		if !ok {
			continue
		}
		evt, err := s.encode(o)
		if err != nil {
			return nil, err
		}
		out = append(out, evt)
	}
	return out, nil
}

// encode is obj as the hub sends it down: an update (OCM's agents treat
// every spec action alike), or its deletion.
func (s *Service[T]) encode(obj T) (*cloudevents.Event, error) {
	action := types.UpdateRequest
	if obj.GetDeletionTimestamp() != nil {
		action = types.DeleteRequest
	}
	return s.codec.Encode(s.sourceID, types.EventType{DataType: s.codec.DataType(), SubResource: types.SubResourceSpec, Action: action}, obj)
}

// RegisterHandler implements server.Service.
func (s *Service[T]) RegisterHandler(h server.EventHandler) {
	if s.informer == nil {
		return
	}
	dt := s.codec.DataType().String()
	tell := func(what string, fn func(context.Context, string, string) error, obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		o, ok := s.as(obj)
		if !ok {
			return
		}
		if err := fn(context.Background(), dt, string(o.GetUID())); err != nil {
			s.log.Error(err, "telling the server of a change", "change", what, "name", o.GetName(), "namespace", o.GetNamespace())
		}
	}
	_, err := s.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { tell("create", h.OnCreate, obj) },
		UpdateFunc: func(_, obj any) { tell("update", h.OnUpdate, obj) },
		DeleteFunc: func(obj any) {
			s.remember(obj)
			tell("delete", h.OnDelete, obj)
		},
	})
	if err != nil {
		s.log.Error(err, "cannot watch the informer")
	}
}

// remember keeps a deleted object as its deletion, and forgets those
// past tombstoneTTL.
func (s *Service[T]) remember(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	o, ok := s.as(obj)
	if !ok {
		return
	}
	gone := o.DeepCopyObject().(T)
	now := metav1.Now()
	gone.SetDeletionTimestamp(&now)
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, t := range s.gone {
		if now.After(t.expires) {
			delete(s.gone, id)
		}
	}
	s.gone[string(o.GetUID())] = tombstone[T]{obj: gone, expires: now.Add(tombstoneTTL)}
}

// HandleStatusUpdate implements server.Service: it carries out an agent's
// request through the type's policy, for the object's own cluster only.
// Errors of the kube-apiserver reach the agent as OCM's agents read them:
// FailedPrecondition with the Kubernetes status as JSON, so a Conflict
// stays a Conflict.
func (s *Service[T]) HandleStatusUpdate(ctx context.Context, evt *cloudevents.Event) error {
	t, err := types.ParseEventType(evt.Type())
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "event %s: %v", evt.ID(), err)
	}
	obj, err := generic.Decode(s.codec, evt)
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "%v", err)
	}
	if obj.GetDeletionTimestamp() != nil {
		return status.Errorf(codes.InvalidArgument, "event %s: an agent does not delete %s", evt.ID(), s.codec.DataType())
	}
	cluster, _, _ := types.StringExtension(evt, types.ExtClusterName)
	if owner := s.codec.ClusterOf(obj); owner != cluster {
		return status.Errorf(codes.InvalidArgument, "event %s: it names cluster %q, but the object %q belongs to cluster %q", evt.ID(), cluster, obj.GetName(), owner)
	}
	if t.SubResource == types.SubResourceStatus && t.Action == types.ResyncResponse {
		t.Action = types.UpdateRequest // how an OCM agent answers a status resync
	}
	id, _ := server.IdentityFrom(ctx)
	if err := s.write(ctx, id, t, obj); err != nil {
		return agentError(err)
	}
	return nil
}

// agentError is err as OCM's agents read a failed publish: a Kubernetes
// API error as FailedPrecondition carrying its status as JSON; a gRPC
// status error as it is; anything else as Internal.
func agentError(err error) error {
	var apiErr apierrors.APIStatus
	if errors.As(err, &apiErr) {
		data, mErr := json.Marshal(struct{ ErrStatus metav1.Status }{apiErr.Status()})
		if mErr == nil {
			return status.Error(codes.FailedPrecondition, string(data))
		}
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codes.Internal, err.Error())
}
