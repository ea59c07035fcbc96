package generic

import (
	"context"
	"errors"
	"reflect"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubetypes "k8s.io/apimachinery/pkg/types"

	"github.com/workwire/sdk-go/generic/types"
)

// Object is what the generic clients carry. Any type that embeds
// metav1.ObjectMeta satisfies it.
//
// A source sends an object to the cluster its namespace names, unless its
// codec is a Clusterer.
// The UID is the event's resourceid. The Generation is its resourceversion
// (unless its codec is a Versioner): the source must increase it for every
// change an agent must see, and agents drop spec events older than what
// they hold.
type Object interface {
	GetUID() kubetypes.UID
	GetNamespace() string
	GetGeneration() int64
	GetDeletionTimestamp() *metav1.Time
}

// Codec turns objects of one data type into events and back. It is the only
// part of a client that knows T's payload. Implementations must be
// goroutine-safe and must return errors, never panic, on bad events.
type Codec[T Object] interface {
	// DataType is the data type this codec encodes and decodes.
	DataType() types.DataType
	// Encode returns the event of type t for obj, with source as its
	// CloudEvents source. It sets the resourceid, resourceversion and
	// clustername extensions; on status events also originalsource (the
	// source the status goes to).
	Encode(source string, t types.EventType, obj T) (*cloudevents.Event, error)
	// Decode returns the object evt carries, given evt's header h as the
	// clients parsed it (types.ParseHeader; Decode reads evt's data and any
	// extension of the codec's own). A delete_request may carry no data;
	// Decode then returns an object with only its identity, version and
	// deletion timestamp set.
	Decode(h types.Header, evt *cloudevents.Event) (T, error)
}

// Decode parses evt's header and decodes it with c: for code that holds an
// event outside the clients (a broker's Service), which parse the header
// themselves. An event whose header cannot be parsed is a *DecodeError;
// what the codec refuses, the codec's error.
func Decode[T Object](c Codec[T], evt *cloudevents.Event) (T, error) {
	var zero T
	if evt == nil || evt.Context == nil || reflect.ValueOf(evt.Context).IsNil() {
		return zero, &DecodeError{Err: errors.New("event is nil or has no context")}
	}
	h, err := types.ParseHeader(evt)
	if err != nil {
		return zero, &DecodeError{EventID: evt.ID(), EventType: evt.Type(), Err: err}
	}
	return c.Decode(h, evt)
}

// Clusterer is an optional interface of a Codec whose objects name their
// cluster elsewhere than in their namespace: codec.KubeCodec's (a
// ManagedCluster by its name, a CSR by a label). A source sends an object
// to the cluster ClusterOf returns.
type Clusterer[T Object] interface {
	ClusterOf(obj T) string
}

// Versioner is an optional interface of a Codec whose wire version of an
// object is not its generation: codec.KubeCodec's is the resourceVersion,
// as OCM's registration carries it (a CSR's certificate or a Lease's
// renewal changes no generation). The clients then compare, and resync, by
// it.
type Versioner[T Object] interface {
	Version(obj T) int64
}

// ListOptions selects the objects a Lister returns. Empty fields match all.
type ListOptions struct {
	// Source is the source ID the objects belong to.
	Source string
	// ClusterName is the cluster the objects are for.
	ClusterName string
	// DataType is the data type the client is resyncing; a lister that keeps
	// several data types returns only the objects of this one. An agent's
	// lister that does not know its objects' data types may return them
	// all: the agent client keeps those that came as DataType.
	DataType types.DataType
}

// Lister lists the objects a client holds, for resync. It is the source of
// truth: a source sends what its lister has, and deletes on agents what it
// no longer has; an agent reports what its lister holds. List must be
// goroutine-safe; while the lister cannot yet answer truthfully (a cache
// still filling) it must return an error, and the client retries later.
type Lister[T Object] interface {
	List(opts ListOptions) ([]T, error)
}

// SourceLister is an optional interface of an agent's Lister: it names the
// sources of the objects the agent holds for clusterName. With it, an agent
// that restarts with a persistent store still tells each source which of
// its resources are that source's own, so no source mistakes another's
// resources for orphans. Without it the agent learns sources from the
// events it receives.
type SourceLister interface {
	Sources(clusterName string) ([]string, error)
}

// ConnectionWatcher is an optional interface of a Lister. The client calls
// Connected after every connect of its transport, on the transport's
// goroutine, so it must not block. A caller that publishes off its own
// goroutine can send then what failed while the transport was away: a
// peer's resync finds such an object only if the peer's request comes after
// this side is back, and the two sides reconnect in no particular order.
type ConnectionWatcher interface {
	Connected()
}

// VersionRepairer is an optional interface of a source's Lister. When an
// agent holds a resource at a newer version than the source's Lister lists —
// the source lost its versions, for example an in-memory store that
// restarted and had its objects created again — the source client calls
// RepairVersion, which must store and return the object with a generation
// above agentVersion; the client then sends it. Without it such a resource
// is left as the agent holds it until the source changes it past that
// version.
type VersionRepairer[T Object] interface {
	RepairVersion(ctx context.Context, obj T, agentVersion int64) (T, error)
}

// ListerFunc adapts a function to a Lister.
type ListerFunc[T Object] func(opts ListOptions) ([]T, error)

// List calls f.
func (f ListerFunc[T]) List(opts ListOptions) ([]T, error) { return f(opts) }

// StatusHashGetter returns the hash of obj's status that status resync
// compares. Both peers must compute it the same way; use StatusHash. It
// may return NoStatus for an object that has no status yet.
type StatusHashGetter[T Object] func(obj T) (string, error)

// NoStatus is the status hash of an object that has no status yet. It
// equals no hash of a status, so an agent asked with it sends what it has.
// A source none of whose objects has a status sends an empty status resync
// request, which asks every agent for every status (docs/protocol.md,
// "Resync"), instead of an entry for each object to every agent.
const NoStatus = ""

// ResourceHandler handles one received object: on a source, a status from an
// agent; on an agent, a spec from a source (t.Action says create, update or
// delete). Handlers run on the client's worker goroutines, never on the
// transport's receive goroutine, and never concurrently for one resource; they
// may block. An error makes the client retry the event with backoff (unless a
// newer event for the resource arrived) and is reported to the error handler.
// A source's handler finds the status's order in ctx (StatusOrderFrom).
//
// A handler can see the same object more than once: brokers deliver at least
// once, a resync sends again what a peer holds, and an error retries. Clients
// drop only what they know to be older than what a handler took, so a
// handler must be idempotent: make the state match obj, never add to it.
type ResourceHandler[T Object] func(ctx context.Context, t types.EventType, obj T) error

// Interface is what the source and the agent clients both offer.
type Interface[T Object] interface {
	// Publish sends obj as an event of type t: on a source a spec event
	// (create, update or delete request), on an agent a status event
	// (update request). It blocks until the transport has sent it.
	Publish(ctx context.Context, t types.EventType, obj T) error
	// Subscribe adds handlers for received objects. Call it before Start.
	Subscribe(handlers ...ResourceHandler[T]) error
	// Resync sends a resync request for dataType now (the zero DataType: for
	// every codec): a source asks agents for statuses whose hash differs, an
	// agent asks sources for specs newer than it holds.
	Resync(ctx context.Context, dataType types.DataType) error
}
