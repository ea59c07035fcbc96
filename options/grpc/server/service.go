package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/internal/resync"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc/protocol"
)

// Service is the persistence layer of one data type the server is itself
// the source of, backed for example by a kube-apiserver or a
// database. With a Service registered (WithService), the server answers
// agents' spec resyncs for its data type from List, sends agents the
// resources the Service reports changed, and hands agents' status events to
// HandleStatusUpdate. Replicas of the server that share one backing store
// share their state through it, and through nothing else.
//
// Implementations must be goroutine-safe.
type Service interface {
	// Get returns the spec event of one resource: a complete CloudEvent of
	// the Service's data type (type "<data type>.spec.<action>", with the
	// resourceid, resourceversion and clustername extensions, and
	// deletiontimestamp while it is being deleted), as the server sends it
	// to the resource's cluster. It returns an error wrapping ErrNotFound
	// for a resource it does not hold.
	Get(ctx context.Context, resourceID string) (*cloudevents.Event, error)
	// List returns the spec events of the resources opts selects.
	List(ctx context.Context, opts ListOptions) ([]*cloudevents.Event, error)
	// HandleStatusUpdate stores a status an agent reported, or carries out
	// an agent's spec request (a create_request or update_request of a
	// resource the agent itself writes, as an OCM agent creates its
	// ManagedCluster and renews its Lease): every event of the Service's
	// data type an agent publishes but its resync requests. ctx carries
	// the agent's verified identity (IdentityFrom). An error reaches the
	// agent, whose publish fails (a gRPC status error keeps its code).
	HandleStatusUpdate(ctx context.Context, evt *cloudevents.Event) error
	// RegisterHandler registers handler to be told of every change of the
	// Service's resources. Every replica of the server registers one, so a
	// Service must support several.
	RegisterHandler(handler EventHandler)
}

// RequireStatusUpdate returns nil for a status update_request, and else an
// InvalidArgument error naming what evt is: for a Service whose agents
// write nothing but statuses.
func RequireStatusUpdate(evt *cloudevents.Event) error {
	et, err := types.ParseEventType(evt.Type())
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "event %s: %v", evt.ID(), err)
	}
	if et.SubResource != types.SubResourceStatus || et.Action != types.UpdateRequest {
		return status.Errorf(codes.InvalidArgument, "event %s is a %s.%s: agents publish only status update requests of %s", evt.ID(), et.SubResource, et.Action, et.DataType)
	}
	return nil
}

// ListOptions selects resources of a Service.
type ListOptions struct {
	// ClusterName selects the resources of one cluster.
	ClusterName string
	// DataType is the Service's data type, as registered.
	DataType string
}

// EventHandler is what a Service tells about changes. The server's
// implementation Gets the resource and queues it for the agents of its
// cluster that are connected to this replica; it never blocks for long.
type EventHandler interface {
	// OnCreate tells that a resource was created.
	OnCreate(ctx context.Context, dataType, resourceID string) error
	// OnUpdate tells that a resource changed, including that it is being
	// deleted (its deletiontimestamp is set).
	OnUpdate(ctx context.Context, dataType, resourceID string) error
	// OnDelete tells that a resource is gone. A Service that still answers
	// Get for it (a Kubernetes object with a finalizer) has it sent once
	// more; one that does not leaves it to the agent's next spec resync,
	// which the server answers with a delete_request.
	OnDelete(ctx context.Context, dataType, resourceID string) error
}

// StatusHasher is implemented by a Service that can tell the status hash
// (generic.StatusHash) of every resource of a cluster it holds. When a
// Service implements it, the status resync the server sends an agent that
// subscribes lists them, and the agent sends only the statuses that
// differ; without it the agent sends every status.
type StatusHasher interface {
	StatusHashes(ctx context.Context, cluster string) ([]types.StatusHash, error)
}

// Resyncer is implemented by a Service that says whether its resources are
// resynced with agents; without it they are. A Service of requests and
// their answers, of which agents keep nothing (ServiceAccount token
// requests), says no: the server then sends its agents no status resync
// request, which an OCM agent of such a type has nothing to answer with,
// and answers no spec resync of its data type.
type Resyncer interface {
	Resyncs() bool
}

// resyncs reports whether b's resources are resynced with agents.
func (b *binding) resyncs() bool {
	r, ok := b.svc.(Resyncer)
	return !ok || r.Resyncs()
}

// ErrNotFound is wrapped by a Service's Get for a resource it does not hold.
var ErrNotFound = errors.New("resource not found")

// binding is a Service registered for one data type.
type binding struct {
	dataType types.DataType
	svc      Service
}

// serviceFor returns the binding of dt (plural or singular form), or nil.
func (s *Server) serviceFor(dt types.DataType) *binding {
	if b := s.services[dt]; b != nil {
		return b
	}
	return s.services[dt.Singular()]
}

// servicesFor returns the bindings an agent subscribed to dataTypes is
// served by (all of them for an empty list).
func (s *Server) servicesFor(dataTypes []types.DataType) []*binding {
	var out []*binding
	if len(dataTypes) == 0 {
		return append(out, s.bindings...)
	}
	for _, dt := range dataTypes {
		if b := s.serviceFor(dt); b != nil {
			out = append(out, b)
		}
	}
	return out
}

// serviceHandler is the EventHandler the server registers with a Service.
type serviceHandler struct {
	s *Server
	b *binding
}

func (h serviceHandler) OnCreate(ctx context.Context, _, resourceID string) error {
	return h.s.sendFromService(ctx, h.b, resourceID)
}

func (h serviceHandler) OnUpdate(ctx context.Context, _, resourceID string) error {
	return h.s.sendFromService(ctx, h.b, resourceID)
}

func (h serviceHandler) OnDelete(ctx context.Context, _, resourceID string) error {
	err := h.s.sendFromService(ctx, h.b, resourceID)
	if errors.Is(err, ErrNotFound) {
		return nil // the agent's next spec resync removes it
	}
	return err
}

// sendFromService queues a resource's current spec for the agents of its
// cluster connected to this server.
func (s *Server) sendFromService(ctx context.Context, b *binding, resourceID string) error {
	evt, err := b.svc.Get(ctx, resourceID)
	if err != nil {
		return fmt.Errorf("get %s %s: %w", b.dataType, resourceID, err)
	}
	cluster, err := types.RequiredString(evt, types.ExtClusterName)
	if err != nil {
		return fmt.Errorf("%s %s: %w", b.dataType, resourceID, err)
	}
	pbe, err := protocol.ToProto(evt)
	if err != nil {
		return fmt.Errorf("encode %s %s: %w", b.dataType, resourceID, err)
	}
	route := options.Route{Role: options.RoleSpec, Source: s.sourceID, Cluster: cluster}
	n := s.reg.route(route, newQueued(route.Cluster, pbe, b.dataType))
	s.log.V(4).Info("sent a change from the service", "dataType", b.dataType, "resourceID", resourceID, "cluster", cluster, "subscribers", n)
	return nil
}

// handleStatus hands an agent's status to the Service of its data type.
func (s *Server) handleStatus(ctx context.Context, b *binding, route options.Route, evt *cloudevents.Event) error {
	if c, ok, _ := types.StringExtension(evt, types.ExtClusterName); !ok || c == "" {
		evt.SetExtension(types.ExtClusterName, route.Cluster) // the verified cluster
	}
	return b.svc.HandleStatusUpdate(ctx, evt)
}

// agentWork is the Service state of one agent subscription, owned by its
// worker goroutine.
type agentWork struct {
	s        *Server
	sub      *subscriber
	sessions resync.Sessions[string, *cloudevents.Event, struct{}] // by data type
}

// specResyncTTL is how long the batches of one spec resync may take to
// arrive before the server forgets the ones it has.
const specResyncTTL = time.Minute

// agentReceiveLimit is the largest stream message an agent is known to
// accept: gRPC's default receive limit, which OCM agents keep. A status
// resync request larger than that goes out in batches.
const agentReceiveLimit = 4 << 20

// requestStatusResync asks the agent for the statuses of b's resources
// that the Service lacks.
func (w *agentWork) requestStatusResync(ctx context.Context, b *binding) {
	var hashes []types.StatusHash
	if h, ok := b.svc.(StatusHasher); ok {
		var err error
		if hashes, err = h.StatusHashes(ctx, w.sub.cluster); err != nil {
			w.s.log.Error(err, "status hashes; asking for every status", "dataType", b.dataType, "cluster", w.sub.cluster)
			hashes = nil
		}
	}
	batches := types.Batches(hashes, types.BatchBytes(agentReceiveLimit), types.StatusHashSize)
	if len(batches) == 0 {
		batches = [][]types.StatusHash{{}}
	}
	resyncID := uuid.NewString()
	et := types.EventType{DataType: b.dataType, SubResource: types.SubResourceStatus, Action: types.ResyncRequest}
	for i, batch := range batches {
		evt := w.s.newEvent(et)
		evt.SetExtension(types.ExtResyncID, resyncID)
		evt.SetExtension(types.ExtResyncBatch, int32(i))
		evt.SetExtension(types.ExtResyncBatches, int32(len(batches)))
		if err := evt.SetData(cloudevents.ApplicationJSON, types.StatusHashList{StatusHashes: batch}); err != nil {
			w.s.log.Error(err, "encode status resync", "dataType", b.dataType)
			return
		}
		route := options.Route{Role: options.RoleStatusResync, Source: w.s.sourceID}
		if w.send(ctx, route, b, evt) != nil {
			return
		}
	}
}

// answerSpecResync answers one batch of the agent's spec resync for b's
// data type as package resync decides (as a generic source does): every
// resource it names that the Service holds newer (or is deleting), a
// delete_request for every resource it names and attributes to this server
// that the Service no longer holds, and, with the last batch, every
// resource of the agent's cluster no batch named. A failure is logged; the
// agent's next resync asks again.
func (w *agentWork) answerSpecResync(ctx context.Context, b *binding, batch *cloudevents.Event) {
	log := w.s.log.WithValues("dataType", b.dataType, "cluster", w.sub.cluster)
	resyncID, index, total, err := resync.BatchOf(batch)
	if err != nil {
		log.Error(err, "malformed spec resync; skipped")
		return
	}
	req, err := types.DecodeResourceVersionList(batch.Data())
	if err != nil {
		log.Error(err, "malformed spec resync; skipped")
		return
	}
	eventSource, _, err := types.StringExtension(batch, types.ExtOriginalSource)
	if err != nil {
		log.Error(err, "malformed spec resync; skipped")
		return
	}
	orphans := w.s.orphans()
	key := b.dataType.String()
	sess, fresh := w.sessions.Open(key, resyncID, total, specResyncTTL, time.Now())
	if fresh {
		held, err := w.list(ctx, b)
		if err != nil {
			w.sessions.Close(key, sess)
			log.Error(err, "list for spec resync; the agent's next resync asks again")
			return
		}
		sess.Hold(held)
	}
	if sess.Answered(index) {
		return
	}
	route := options.Route{Role: options.RoleSpec, Source: w.s.sourceID, Cluster: w.sub.cluster}
	kept := 0
	var sends []func() error
	for _, e := range req.ResourceVersions {
		evt, ok := sess.Name(e.ResourceID)
		held, err := heldOf(evt, ok)
		if err != nil {
			log.Error(err, "spec from the service; skipped", "resourceID", e.ResourceID)
			continue
		}
		switch resync.Spec(held, ok, e, eventSource, orphans) {
		case resync.Send:
		case resync.DeleteOrphan:
			evt = w.s.orphanDelete(b, w.sub.cluster, e)
		case resync.KeepOrphan:
			kept++
			continue
		case resync.AgentAhead:
			log.V(2).Info("the agent holds a newer version than the service", "resourceID", e.ResourceID, "service", held.Version, "agent", e.ResourceVersion)
			continue
		default:
			continue
		}
		sends = append(sends, func() error { return w.send(ctx, route, b, evt) })
	}
	if sess.Send(sends) != nil {
		return
	}
	if kept > 0 {
		log.V(2).Info("in the orphan grace period: orphans are kept for now", "orphans", kept)
	}
	if !sess.Finish(index) {
		return
	}
	if sess.AnswerUnnamed(func(evt *cloudevents.Event) error { return w.send(ctx, route, b, evt) }) != nil {
		return
	}
	w.sessions.Close(key, sess)
	log.V(2).Info("answered spec resync", "sent", sess.Sent, "held", sess.Held())
}

// list returns the spec events of the agent's resources of b's data type
// that the Service holds, by resource ID.
func (w *agentWork) list(ctx context.Context, b *binding) (map[string]*cloudevents.Event, error) {
	evts, err := b.svc.List(ctx, ListOptions{ClusterName: w.sub.cluster, DataType: b.dataType.String()})
	if err != nil {
		return nil, err
	}
	held := make(map[string]*cloudevents.Event, len(evts))
	for _, e := range evts {
		id, _, err := types.StringExtension(e, types.ExtResourceID)
		if err != nil || id == "" {
			w.s.log.Error(err, "a spec from the service without a resource ID; skipped", "dataType", b.dataType, "id", e.ID())
			continue
		}
		held[id] = e
	}
	return held, nil
}

// heldOf is what package resync needs to know of a Service's spec event,
// if ok.
func heldOf(evt *cloudevents.Event, ok bool) (resync.Held, error) {
	if !ok {
		return resync.Held{}, nil
	}
	v, _, err := types.Int64Extension(evt, types.ExtResourceVersion)
	if err != nil {
		return resync.Held{}, err
	}
	_, deleting, err := types.TimeExtension(evt, types.ExtDeletionTimestamp)
	if err != nil {
		return resync.Held{}, err
	}
	return resync.Held{Version: v, Deleting: deleting}, nil
}

// orphans is the server's policy for what agents hold and its Services do
// not.
func (s *Server) orphans() resync.Orphans {
	return resync.Orphans{
		Source: s.sourceID,
		Never:  s.cfg.KeepOrphans,
		Grace:  time.Since(time.Unix(0, s.servedAt.Load())) < time.Duration(s.cfg.OrphanGracePeriod),
	}
}

// send queues evt for the agent, waiting for room; an error when the
// subscriber is gone or ctx ended. An event that cannot be encoded is
// logged and skipped.
func (w *agentWork) send(ctx context.Context, route options.Route, b *binding, evt *cloudevents.Event) error {
	pbe, err := protocol.ToProto(evt)
	if err != nil {
		w.s.log.Error(err, "encode event from the service; skipped", "id", evt.ID())
		return nil
	}
	return w.sub.offerWait(ctx, newQueued(route.Cluster, pbe, b.dataType))
}

// orphanDelete is the delete_request for a resource the agent holds and the
// Service does not.
func (s *Server) orphanDelete(b *binding, cluster string, e types.ResourceVersion) *cloudevents.Event {
	evt := s.newEvent(types.EventType{DataType: b.dataType, SubResource: types.SubResourceSpec, Action: types.DeleteRequest})
	evt.SetExtension(types.ExtResourceID, e.ResourceID)
	evt.SetExtension(types.ExtClusterName, cluster)
	types.SetTimeExtension(evt, types.ExtDeletionTimestamp, time.Now())
	if err := types.SetInt32Extension(evt, types.ExtResourceVersion, e.ResourceVersion); err != nil {
		evt.SetExtension(types.ExtResourceVersion, int32(0))
	}
	return evt
}

func (s *Server) newEvent(et types.EventType) *cloudevents.Event {
	evt := cloudevents.New()
	evt.SetID(uuid.NewString())
	evt.SetSource(s.sourceID)
	evt.SetType(et.String())
	evt.SetTime(time.Now())
	return &evt
}
