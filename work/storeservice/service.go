// Package storeservice serves ManifestWorks kept in a database of their
// own (a workstore.Store: work/pgstore's PostgreSQL, say) through
// workwire's gRPC broker: the server.Service of the manifestbundles data
// type over the Store. Each replica of the broker runs one over the shared
// database; Run tells its server of every change any replica (or the
// service's API) made, and the server sends it to the agents of the work's
// cluster connected to that replica.
//
//	store, err := pgstore.Open(ctx, pool)
//	svc, err := storeservice.New(store, server.DefaultSourceID)
//	srv, err := server.New(cfg, server.WithService(codec.ManifestBundlesDataType.String(), svc))
//	go svc.Run(ctx, nil)
//	err = srv.Serve(ctx, listener)
package storeservice

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/go-logr/logr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc/server"
	"github.com/workwire/sdk-go/work/workstore"
)

// Option configures a Service.
type Option func(*Service)

// WithLogger sets the Service's logger. Default: klog.Background().
func WithLogger(l logr.Logger) Option { return func(s *Service) { s.log = l } }

// Service is a server.Service of the works of a workstore.Store. It is
// goroutine-safe.
type Service struct {
	store    workstore.Store
	codec    *codec.ManifestBundleCodec
	sourceID string
	log      logr.Logger

	mu       sync.Mutex
	handlers []server.EventHandler
}

var (
	_ server.Service      = (*Service)(nil)
	_ server.StatusHasher = (*Service)(nil)
)

// New returns the Service of store's works, speaking as sourceID (the
// server's Config.SourceID). It does no I/O; Run it.
func New(store workstore.Store, sourceID string, opts ...Option) (*Service, error) {
	var errs []error
	if store == nil {
		errs = append(errs, errors.New("store is nil"))
	}
	if sourceID == "" {
		errs = append(errs, errors.New("sourceID is empty"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("storeservice: %w", err)
	}
	s := &Service{store: store, codec: codec.NewManifestBundleCodec(), sourceID: sourceID, log: klog.Background()}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// Run tells the registered handlers of every change of the works that
// their agents see — a new work, a changed spec, a deletion — until ctx
// ends (see workstore.Store.Watch). ready, if not nil, is closed once it
// watches. It returns nil when ctx ends.
func (s *Service) Run(ctx context.Context, ready chan<- struct{}) error {
	dataType := codec.ManifestBundlesDataType.String()
	return s.store.Watch(logr.NewContext(ctx, s.log), func(c workstore.Change) {
		var tell func(server.EventHandler) error
		switch c.Op {
		case workstore.Created:
			tell = func(h server.EventHandler) error { return h.OnCreate(ctx, dataType, c.UID) }
		case workstore.SpecChanged:
			tell = func(h server.EventHandler) error { return h.OnUpdate(ctx, dataType, c.UID) }
		case workstore.Deleted:
			tell = func(h server.EventHandler) error { return h.OnDelete(ctx, dataType, c.UID) }
		default:
			return // a status: the agent sent it
		}
		s.mu.Lock()
		handlers := append([]server.EventHandler(nil), s.handlers...)
		s.mu.Unlock()
		for _, h := range handlers {
			s.tell(ctx, c, func() error { return tell(h) })
		}
	}, ready)
}

// tellAttempts bounds how often a change is told again when telling it
// failed (its Get failed: the database is away for a moment); past it, the
// agent's next resync delivers the change.
const tellAttempts = 8

var tellRetry = options.Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second}

// tell calls tell until it succeeds, the work turns out to be gone, ctx
// ends, or tellAttempts failed. Later changes wait: they are told in
// order.
func (s *Service) tell(ctx context.Context, c workstore.Change, tell func() error) {
	for attempt := 0; ; attempt++ {
		err := tell()
		if err == nil || errors.Is(err, server.ErrNotFound) || ctx.Err() != nil {
			return
		}
		if attempt+1 == tellAttempts {
			s.log.Error(err, "cannot send a work's change; the agent's next resync will", "change", c.Op.String(), "uid", c.UID, "cluster", c.Cluster)
			return
		}
		s.log.V(2).Info("cannot send a work's change; retrying", "change", c.Op.String(), "uid", c.UID, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(tellRetry.Delay(attempt)):
		}
	}
}

// RegisterHandler implements server.Service.
func (s *Service) RegisterHandler(h server.EventHandler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handlers = append(s.handlers, h)
}

// AcknowledgesSpecs implements server.Acknowledger: a work agent reports a
// status for every generation it applies, so the server sends again a
// generation that goes without one.
func (s *Service) AcknowledgesSpecs() bool { return true }

// Get implements server.Service: the spec event of the work whose UID is
// resourceID.
func (s *Service) Get(ctx context.Context, resourceID string) (*cloudevents.Event, error) {
	w, err := s.store.GetByUID(ctx, resourceID)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("work %s: %w", resourceID, server.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	return s.specEvent(w)
}

// List implements server.Service: the spec events of the works of
// opts.ClusterName (every work for ""). A work that cannot be encoded is
// reported and left out, so it cannot hold up the others.
func (s *Service) List(ctx context.Context, opts server.ListOptions) ([]*cloudevents.Event, error) {
	l, err := s.store.List(ctx, workstore.ListOptions{Cluster: opts.ClusterName})
	if err != nil {
		return nil, err
	}
	out := make([]*cloudevents.Event, 0, len(l.Items))
	for i := range l.Items {
		evt, err := s.specEvent(&l.Items[i])
		if err != nil {
			s.log.Error(err, "cannot send a work; left out", "cluster", l.Items[i].Namespace, "name", l.Items[i].Name)
			continue
		}
		out = append(out, evt)
	}
	return out, nil
}

// StatusHashes implements server.StatusHasher: the hashes of the statuses
// the database holds for cluster's works, or none (ask for every status)
// if no work has one.
func (s *Service) StatusHashes(ctx context.Context, cluster string) ([]types.StatusHash, error) {
	l, err := s.store.List(ctx, workstore.ListOptions{Cluster: cluster})
	if err != nil {
		return nil, err
	}
	works := make([]*workv1.ManifestWork, len(l.Items))
	for i := range l.Items {
		works[i] = &l.Items[i]
	}
	return codec.StatusHashes(works)
}

// HandleStatusUpdate implements server.Service: it stores the status an
// agent reported unless a newer one is stored (workstore.Store.ApplyStatus);
// the Deleted status of a work being deleted removes it.
func (s *Service) HandleStatusUpdate(ctx context.Context, evt *cloudevents.Event) error {
	if err := server.RequireStatusUpdate(evt); err != nil {
		return err
	}
	reported, err := generic.Decode(s.codec, evt)
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "status event %s: %v", evt.ID(), err)
	}
	version, _, err := types.Int64Extension(evt, types.ExtResourceVersion)
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "status event %s: %v", evt.ID(), err)
	}
	seq, hasSeq, err := types.SequenceID(evt)
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "status event %s: %v", evt.ID(), err)
	}
	_, err = s.store.ApplyStatus(ctx, string(reported.UID), generic.StatusOrder{Version: version, Sequence: seq, HasSequence: hasSeq}, reported.Status)
	if err != nil {
		return fmt.Errorf("status of work %s: %w", reported.UID, err)
	}
	return nil
}

func (s *Service) specEvent(w *workv1.ManifestWork) (*cloudevents.Event, error) {
	evt, err := s.codec.Encode(s.sourceID, codec.SpecEventType(w), w)
	if err != nil {
		return nil, fmt.Errorf("work %s/%s: %w", w.Namespace, w.Name, err)
	}
	return evt, nil
}
