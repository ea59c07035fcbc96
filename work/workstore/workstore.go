// Package workstore is the contract of a database of ManifestWorks for a
// service that keeps its works itself: a Store, which work/pgstore
// implements over PostgreSQL and NewMemory in memory (for examples and
// tests), and what feeds agents from any Store — a generic source
// client's Lister and status handler (this package), or the gRPC broker's
// Service (work/storeservice).
//
// A Store behaves as a kube-apiserver does for a work: Create gives it a
// UID, generation 1 and a resourceVersion (new at every write); Update must
// name the resourceVersion it read (else Conflict) and raises the
// generation when the spec changes; Delete marks it, and it stays until
// its agent reports it Deleted. A status is stored only over an older one —
// by the generation it reports on, then the agent's sequence
// (generic.StatusOrder) — so a redelivered or reordered status changes
// nothing, whichever replica writes it. Errors are Kubernetes API errors
// (NotFound, AlreadyExists, Conflict, BadRequest), which a REST API maps
// to their HTTP codes. storetest checks an implementation against all of
// it.
package workstore

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/internal/manifests"
)

// Store keeps ManifestWorks and their statuses. Implementations are
// goroutine-safe.
type Store interface {
	// Create stores a new work of cluster w.Namespace with a new UID,
	// generation 1 and a resourceVersion, and returns it as stored. A work
	// of that name in that cluster already is AlreadyExists; one CheckWork
	// refuses, its error.
	Create(ctx context.Context, w *workv1.ManifestWork) (*workv1.ManifestWork, error)
	// Get returns the work name of cluster, or NotFound.
	Get(ctx context.Context, cluster, name string) (*workv1.ManifestWork, error)
	// GetByUID returns the work whose UID is uid (its resource ID on the
	// wire), or NotFound.
	GetByUID(ctx context.Context, uid string) (*workv1.ManifestWork, error)
	// Update writes w's labels, annotations and spec over the stored work
	// of its name and cluster if w.ResourceVersion is the stored one (else
	// Conflict; an empty one is BadRequest), raising the generation when
	// the spec changed. The spec of a work being deleted no longer changes
	// (Conflict).
	Update(ctx context.Context, w *workv1.ManifestWork) (*workv1.ManifestWork, error)
	// Delete marks the work deleted and returns it; it stays until its
	// agent reports it Deleted (ApplyStatus). A work being deleted already
	// is returned as it is.
	Delete(ctx context.Context, cluster, name string) (*workv1.ManifestWork, error)
	// List returns the works opts selects, ordered by cluster and name.
	List(ctx context.Context, opts ListOptions) (*workv1.ManifestWorkList, error)
	// ApplyStatus stores the status an agent reported for the work whose
	// UID is uid unless a newer one is stored, and reports whether it did.
	// The Deleted condition on a work being deleted removes the work. A
	// status of a work that is gone is dropped (false, nil).
	ApplyStatus(ctx context.Context, uid string, order generic.StatusOrder, status workv1.ManifestWorkStatus) (bool, error)
	// Watch tells handle of every change of the works, whoever made it,
	// in the order they were made, from the moment it closes ready (if not
	// nil) until ctx ends, and returns nil then. handle runs on Watch's
	// goroutine, one change at a time.
	Watch(ctx context.Context, handle func(Change), ready chan<- struct{}) error
}

// ListOptions select works.
type ListOptions struct {
	// Cluster selects one cluster's works; "" every cluster's.
	Cluster string
	// Selector selects by label; nil selects everything. Supported
	// operators: =, ==, !=, in, notin, exists and !exists (CheckSelector).
	Selector labels.Selector
	// Limit bounds the works returned (0: no bound); Continue, from the
	// previous page's list, starts after it.
	Limit    int
	Continue string
}

// Op is what happened to a work.
type Op byte

const (
	Created       Op = 'c' // a new work
	SpecChanged   Op = 's' // its spec, labels, annotations or deletion changed
	StatusChanged Op = 't' // written, but none of those changed: its status, say
	Deleted       Op = 'd' // it is gone: its agent reported it Deleted
)

func (o Op) String() string {
	switch o {
	case Created:
		return "created"
	case SpecChanged:
		return "spec changed"
	case StatusChanged:
		return "status changed"
	case Deleted:
		return "deleted"
	}
	return fmt.Sprintf("op(%c)", byte(o))
}

// Change is one change of a work, as Watch tells it.
type Change struct {
	Op       Op
	UID      string
	Cluster  string
	Revision int64 // the work's resourceVersion after the change (before it, for Deleted)
}

// The rest is for implementations of Store, so that they agree.

// CheckNames checks a work's cluster (a DNS label: it is a namespace) and
// name (a DNS subdomain); BadRequest names what is wrong.
func CheckNames(cluster, name string) error {
	var msgs []string
	for _, m := range validation.IsDNS1123Label(cluster) {
		msgs = append(msgs, fmt.Sprintf("cluster %q: %s", cluster, m))
	}
	for _, m := range validation.IsDNS1123Subdomain(name) {
		msgs = append(msgs, fmt.Sprintf("name %q: %s", name, m))
	}
	if len(msgs) > 0 {
		return apierrors.NewBadRequest(strings.Join(msgs, "; "))
	}
	return nil
}

// CheckWork checks what a writer gives a Store: its names (CheckNames),
// and each manifest, which must be a JSON object with an apiVersion and a
// kind (what an agent needs to apply it); Invalid names what is wrong.
func CheckWork(w *workv1.ManifestWork) error {
	if err := CheckNames(w.Namespace, w.Name); err != nil {
		return err
	}
	if errs := manifests.Check(w); len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: workv1.GroupName, Kind: "ManifestWork"}, w.Name, errs)
	}
	return nil
}

// SameSpec reports whether a and b are the same spec as JSON values:
// neither the order of a manifest's keys nor its spacing makes a change.
func SameSpec(a, b *workv1.ManifestWorkSpec) bool {
	va, erra := jsonValue(a)
	vb, errb := jsonValue(b)
	return erra == nil && errb == nil && reflect.DeepEqual(va, vb)
}

func jsonValue(v any) (any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	err = json.Unmarshal(data, &out)
	return out, err
}

// CheckSelector refuses, with BadRequest, a selector a Store need not
// support (the operators gt and lt).
func CheckSelector(s labels.Selector) error {
	if s == nil {
		return nil
	}
	reqs, _ := s.Requirements()
	for _, r := range reqs {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.NotEquals, selection.In, selection.NotIn, selection.Exists, selection.DoesNotExist:
		default:
			return apierrors.NewBadRequest(fmt.Sprintf("label selector %q: operator %s is not supported", r.String(), r.Operator()))
		}
	}
	return nil
}

// Position is where a page of a list ended: its last work's cluster and
// name.
type Position struct {
	Cluster string `json:"c"`
	Name    string `json:"n"`
}

// Continue is the continue token of a page that ended at p.
func (p Position) Continue() string {
	data, _ := json.Marshal(p)
	return base64.RawURLEncoding.EncodeToString(data)
}

// ParseContinue returns where the page that gave token ended; BadRequest
// for a token no list gave.
func ParseContinue(token string) (Position, error) {
	var p Position
	data, err := base64.RawURLEncoding.DecodeString(token)
	if err == nil {
		err = json.Unmarshal(data, &p)
	}
	if err != nil || p.Cluster == "" || p.Name == "" {
		return Position{}, apierrors.NewBadRequest(fmt.Sprintf("continue %q: not a token a list gave", token))
	}
	return p, nil
}

// Resource is the group resource of the errors a Store returns.
var Resource = workv1.Resource("manifestworks")

// ParseResourceVersion parses the resourceVersion an update names;
// BadRequest for none, or one no Store gave.
func ParseResourceVersion(rv string) (int64, error) {
	v, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		return 0, apierrors.NewBadRequest(fmt.Sprintf("resourceVersion %q: an update names the version it changes", rv))
	}
	return v, nil
}

// NewConflict is the error of an update of name from a version that is
// not the stored one.
func NewConflict(name string) error {
	return apierrors.NewConflict(Resource, name, errors.New("the object has been modified; please apply your changes to the latest version and try again"))
}

// NewDeletingConflict is the error of a change of the spec of name, which
// is being deleted.
func NewDeletingConflict(name string) error {
	return apierrors.NewConflict(Resource, name, errors.New("the work is being deleted: its spec no longer changes"))
}

// CheckLimit refuses a negative list limit with BadRequest.
func CheckLimit(limit int) error {
	if limit < 0 {
		return apierrors.NewBadRequest(fmt.Sprintf("limit %d: want 0 or more", limit))
	}
	return nil
}
