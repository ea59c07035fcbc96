package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/go-logr/logr"
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

// VersionRepairer is implemented by a Service that can move a resource past
// a version an agent holds, as generic.VersionRepairer is for a source's
// Lister: when an agent's spec resync names a resource at a newer version
// than the Service's (a store that lost its versions), the server calls
// RepairVersion, which must store the resource at a version above
// agentVersion and return its spec event; the server then sends it.
// Without it the resource stays as the agent holds it until the Service
// changes it past that version.
type VersionRepairer interface {
	RepairVersion(ctx context.Context, resourceID string, agentVersion int64) (*cloudevents.Event, error)
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
	// acked: the server waits for acknowledgements of its specs, as peer
	// of ack.Peer names it (see Acknowledger).
	acked bool
	peer  string
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
	s.sending(b, cluster, evt) // before it goes: its status may come back first
	n := s.reg.route(route, newQueued(route.Cluster, pbe, b.dataType))
	if n == 0 {
		s.unsent(b, cluster, resourceID)
	}
	s.log.V(4).Info("sent a change from the service", "dataType", b.dataType, "resourceID", resourceID, "cluster", cluster, "subscribers", n)
	return nil
}

// handleStatus hands an agent's status to the Service of its data type.
func (s *Server) handleStatus(ctx context.Context, b *binding, route options.Route, evt *cloudevents.Event) error {
	if c, ok, _ := types.StringExtension(evt, types.ExtClusterName); !ok || c == "" {
		evt.SetExtension(types.ExtClusterName, route.Cluster) // the verified cluster
	}
	s.acknowledge(b, route.Cluster, evt)
	return b.svc.HandleStatusUpdate(ctx, evt)
}

// agentWork is the Service state of one agent subscription, owned by its
// worker goroutine.
type agentWork struct {
	s        *Server
	sub      *subscriber
	sessions resync.Sessions[string, spec, struct{}] // by data type
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
	et := types.EventType{DataType: b.dataType, SubResource: types.SubResourceStatus, Action: types.ResyncRequest}
	events, err := resync.Request(w.s.sourceID, et, hashes, agentReceiveLimit, types.StatusHashSize,
		func(e []types.StatusHash) any { return types.StatusHashList{StatusHashes: e} }, nil)
	if err != nil {
		w.s.log.Error(err, "encode status resync", "dataType", b.dataType)
		return
	}
	route := options.Route{Role: options.RoleStatusResync, Source: w.s.sourceID}
	for _, evt := range events {
		if w.send(ctx, route, b, evt) != nil {
			return
		}
	}
}

// answerSpecResync answers one batch of the agent's spec resync for b's
// data type as package resync answers it for every source
// (resync.AnswerSpec). A failure is logged; the agent's next resync asks
// again.
func (w *agentWork) answerSpecResync(ctx context.Context, b *binding, batch *cloudevents.Event) {
	log := w.s.log.WithValues("dataType", b.dataType, "cluster", w.sub.cluster)
	req, err := resync.ParseSpecRequest(batch)
	if err != nil {
		log.Error(err, "malformed spec resync; skipped")
		return
	}
	src := specAnswer{w: w, b: b, log: log}
	answer, err := resync.AnswerSpec(ctx, &w.sessions, b.dataType.String(), specResyncTTL, req, w.s.orphans(), src,
		func(*resync.Session[spec, struct{}]) { w.s.resynced(b, w.sub.cluster) })
	if err != nil {
		log.Error(err, "spec resync answer failed; the agent's next resync asks again")
		return
	}
	if answer.Kept > 0 {
		log.V(2).Info("in the orphan grace period: orphans are kept for now", "orphans", answer.Kept)
	}
	if sess := answer.Done; sess != nil {
		log.V(2).Info("answered spec resync", "sent", sess.Sent, "held", sess.Held())
	}
}

// spec is a Service's spec event of one resource, and what package resync
// needs to know of it.
type spec struct {
	evt  *cloudevents.Event
	held resync.Held
}

// specAnswer is the server over b's Service as resync.AnswerSpec sees it,
// answering the spec resync of w's agent.
type specAnswer struct {
	w   *agentWork
	b   *binding
	log logr.Logger
}

// List returns the spec events of the agent's resources of b's data type
// that the Service holds, by resource ID; one it cannot read is logged and
// left out.
func (a specAnswer) List(ctx context.Context) (map[string]spec, error) {
	evts, err := a.b.svc.List(ctx, ListOptions{ClusterName: a.w.sub.cluster, DataType: a.b.dataType.String()})
	if err != nil {
		return nil, fmt.Errorf("list for spec resync: %w", err)
	}
	held := make(map[string]spec, len(evts))
	for _, e := range evts {
		id, sp, err := specOf(e)
		switch {
		case id == "":
			a.log.Error(err, "a spec from the service without a resource ID; skipped", "id", e.ID())
			continue
		case err != nil:
			// Held all the same, so the agent is never told to delete
			// what the Service has: it gets the event as it is, and
			// judges it.
			a.log.Error(err, "a spec from the service that cannot be read; sent as it is", "id", e.ID(), "resourceID", id)
			sp = spec{evt: e, held: resync.Held{Version: math.MaxInt64}}
		}
		held[id] = sp
	}
	return held, nil
}

func (a specAnswer) Held(sp spec) resync.Held { return sp.held }

// Repair asks a VersionRepairer Service to move the resource past the
// version the agent holds; without one the resource stays as the agent
// holds it, as a generic source without a VersionRepairer leaves it.
func (a specAnswer) Repair(ctx context.Context, sp spec, agentVersion int64) (spec, error) {
	id, _, _ := types.StringExtension(sp.evt, types.ExtResourceID)
	r, ok := a.b.svc.(VersionRepairer)
	if !ok {
		a.log.V(2).Info("agent holds a newer version than the service; no VersionRepairer", "resourceID", id, "service", sp.held.Version, "agent", agentVersion)
		return sp, nil
	}
	evt, err := r.RepairVersion(ctx, id, agentVersion)
	if err != nil {
		return sp, fmt.Errorf("repair version of %s: %w", id, err)
	}
	_, repaired, err := specOf(evt)
	if err != nil {
		return sp, fmt.Errorf("repair version of %s: %w", id, err)
	}
	a.log.V(2).Info("repaired version", "resourceID", id, "was", sp.held.Version, "agent", agentVersion, "now", repaired.held.Version)
	return repaired, nil
}

func (a specAnswer) Send(ctx context.Context, sp spec, _ bool) error {
	a.w.s.sending(a.b, a.w.sub.cluster, sp.evt)
	return a.w.send(ctx, a.route(), a.b, sp.evt)
}

func (a specAnswer) DeleteOrphan(ctx context.Context, e types.ResourceVersion) error {
	evt, err := resync.OrphanDelete(a.w.s.sourceID, a.b.dataType, a.w.sub.cluster, e)
	if err != nil {
		a.log.Error(err, "cannot delete orphan; skipped")
		return nil
	}
	return a.w.send(ctx, a.route(), a.b, evt)
}

func (a specAnswer) route() options.Route {
	return options.Route{Role: options.RoleSpec, Source: a.w.s.sourceID, Cluster: a.w.sub.cluster}
}

// specOf reads a Service's spec event: its resource ID, version and
// deletion. The ID is returned with an error about the rest.
func specOf(evt *cloudevents.Event) (string, spec, error) {
	if evt == nil {
		return "", spec{}, errors.New("spec event is nil")
	}
	id, _, err := types.StringExtension(evt, types.ExtResourceID)
	if err != nil {
		return "", spec{}, err
	}
	if id == "" {
		return "", spec{}, errors.New("spec event has no resourceid extension")
	}
	v, _, err := types.Int64Extension(evt, types.ExtResourceVersion)
	if err != nil {
		return id, spec{}, err
	}
	_, deleting, err := types.TimeExtension(evt, types.ExtDeletionTimestamp)
	if err != nil {
		return id, spec{}, err
	}
	return id, spec{evt: evt, held: resync.Held{Version: v, Deleting: deleting}}, nil
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
