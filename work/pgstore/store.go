package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	kubetypes "k8s.io/apimachinery/pkg/types"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/work/workstore"
)

// Store is a workstore.Store in PostgreSQL. It is goroutine-safe; several
// Stores (replicas) may share one database.
type Store struct {
	pool    *pgxpool.Pool
	channel string // where the schema's changes are announced
}

// Open migrates the schema of pool's database — the first schema of its
// search_path, "public" by default — to SchemaVersion and returns its
// Store. Replicas may Open at once: they migrate once.
func Open(ctx context.Context, pool *pgxpool.Pool) (*Store, error) {
	if pool == nil {
		return nil, errors.New("pgstore: no connection pool")
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgstore: connect: %w", err)
	}
	defer conn.Release()
	if err := migrate(ctx, conn.Conn()); err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	var schema string
	if err := conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	// PostgreSQL's channel names, like its identifiers, have at most 63
	// bytes; the trigger's notifications would fail.
	if channel := schema + ".workwire_works"; len(channel) > 63 {
		return nil, fmt.Errorf("pgstore: schema %q: its notification channel %q is longer than PostgreSQL's 63 bytes; use a schema name of at most 48", schema, channel)
	}
	return &Store{pool: pool, channel: schema + ".workwire_works"}, nil
}

var _ workstore.Store = (*Store)(nil)

// stored is what the work column holds: what a writer of a work says
// about it, beyond its name and cluster.
type stored struct {
	Labels      map[string]string       `json:"labels,omitempty"`
	Annotations map[string]string       `json:"annotations,omitempty"`
	Spec        workv1.ManifestWorkSpec `json:"spec"`
}

func storedOf(w *workv1.ManifestWork) ([]byte, []byte, error) {
	data, err := json.Marshal(stored{Labels: w.Labels, Annotations: w.Annotations, Spec: w.Spec})
	if err != nil {
		return nil, nil, err
	}
	l := w.Labels
	if l == nil {
		l = map[string]string{}
	}
	lbl, err := json.Marshal(l)
	return data, lbl, err
}

const columns = `uid, cluster, name, generation, revision, work, created_at, deleting_at, status`

func scan(row pgx.Row) (*workv1.ManifestWork, error) {
	var (
		uid             uuid.UUID
		cluster, name   string
		generation, rev int64
		data, status    []byte
		created         time.Time
		deleting        *time.Time
	)
	if err := row.Scan(&uid, &cluster, &name, &generation, &rev, &data, &created, &deleting, &status); err != nil {
		return nil, err
	}
	var s stored
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("work %s/%s in the database: %w", cluster, name, err)
	}
	w := &workv1.ManifestWork{
		TypeMeta: metav1.TypeMeta{APIVersion: workv1.GroupVersion.String(), Kind: "ManifestWork"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: cluster, UID: kubetypes.UID(uid.String()), Generation: generation,
			ResourceVersion: strconv.FormatInt(rev, 10), CreationTimestamp: metav1.NewTime(created),
			Labels: s.Labels, Annotations: s.Annotations,
		},
		Spec: s.Spec,
	}
	if deleting != nil {
		t := metav1.NewTime(*deleting)
		w.DeletionTimestamp = &t
	}
	if status != nil {
		if err := json.Unmarshal(status, &w.Status); err != nil {
			return nil, fmt.Errorf("status of work %s/%s in the database: %w", cluster, name, err)
		}
	}
	return w, nil
}

// Create stores a new work of cluster w.Namespace, with a new UID and
// generation 1, and returns it as stored. A work of that name in that
// cluster already is AlreadyExists.
func (s *Store) Create(ctx context.Context, w *workv1.ManifestWork) (*workv1.ManifestWork, error) {
	if err := workstore.CheckWork(w); err != nil {
		return nil, err
	}
	data, lbl, err := storedOf(w)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	out, err := scan(s.pool.QueryRow(ctx, `INSERT INTO workwire_works (uid, cluster, name, generation, labels, work)
		VALUES ($1, $2, $3, 1, $4, $5) RETURNING `+columns, uuid.New(), w.Namespace, w.Name, lbl, data))
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" { // unique_violation
		return nil, apierrors.NewAlreadyExists(workstore.Resource, w.Name)
	}
	return out, err
}

// Get returns the work name of cluster, or NotFound.
func (s *Store) Get(ctx context.Context, cluster, name string) (*workv1.ManifestWork, error) {
	w, err := scan(s.pool.QueryRow(ctx, `SELECT `+columns+` FROM workwire_works WHERE cluster = $1 AND name = $2`, cluster, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, apierrors.NewNotFound(workstore.Resource, name)
	}
	return w, err
}

// GetByUID returns the work whose UID is uid (its resource ID on the
// wire), or NotFound.
func (s *Store) GetByUID(ctx context.Context, uid string) (*workv1.ManifestWork, error) {
	id, err := uuid.Parse(uid)
	if err != nil {
		return nil, apierrors.NewNotFound(workstore.Resource, uid)
	}
	w, err := scan(s.pool.QueryRow(ctx, `SELECT `+columns+` FROM workwire_works WHERE uid = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, apierrors.NewNotFound(workstore.Resource, uid)
	}
	return w, err
}

// Update writes w's labels, annotations and spec over the stored work of
// its name and cluster, if w.ResourceVersion is the stored one (else
// Conflict; empty is refused too: a write must say what it read). A
// changed spec raises the generation. A work being deleted takes no
// change of spec (Conflict).
func (s *Store) Update(ctx context.Context, w *workv1.ManifestWork) (*workv1.ManifestWork, error) {
	if err := workstore.CheckWork(w); err != nil {
		return nil, err
	}
	if _, err := workstore.ParseResourceVersion(w.ResourceVersion); err != nil {
		return nil, err
	}
	data, lbl, err := storedOf(w)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// What the write decides on, read under the row's lock; the spec
	// compared as JSON values, as jsonb compares them: neither the order of
	// a manifest's keys nor its spacing is a change.
	var (
		uid                   uuid.UUID
		rev, generation       int64
		deleting, specChanged bool
	)
	err = tx.QueryRow(ctx, `SELECT uid, revision, generation, deleting_at IS NOT NULL, work->'spec' IS DISTINCT FROM $3::jsonb->'spec'
		FROM workwire_works WHERE cluster = $1 AND name = $2 FOR UPDATE`, w.Namespace, w.Name, data).Scan(&uid, &rev, &generation, &deleting, &specChanged)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, apierrors.NewNotFound(workstore.Resource, w.Name)
	}
	if err != nil {
		return nil, err
	}
	if strconv.FormatInt(rev, 10) != w.ResourceVersion || w.UID != "" && string(w.UID) != uid.String() {
		return nil, workstore.NewConflict(w.Name)
	}
	if specChanged {
		if deleting {
			return nil, workstore.NewDeletingConflict(w.Name)
		}
		generation++
	}
	out, err := scan(tx.QueryRow(ctx, `UPDATE workwire_works SET generation = $2, labels = $3, work = $4 WHERE uid = $1 RETURNING `+columns,
		uid, generation, lbl, data))
	if err != nil {
		return nil, err
	}
	return out, tx.Commit(ctx)
}

// Delete marks the work name of cluster deleted and returns it: it stays,
// and agents are told, until its agent reports it Deleted (ApplyStatus).
// A work already being deleted is returned as it is.
func (s *Store) Delete(ctx context.Context, cluster, name string) (*workv1.ManifestWork, error) {
	w, err := scan(s.pool.QueryRow(ctx, `UPDATE workwire_works SET deleting_at = now()
		WHERE cluster = $1 AND name = $2 AND deleting_at IS NULL RETURNING `+columns, cluster, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return s.Get(ctx, cluster, name) // being deleted already, or NotFound
	}
	return w, err
}

// ApplyStatus stores the status an agent reported for the work whose UID
// is uid, unless a newer one is stored (order: the generation it reports
// on, then the agent's sequence), and reports whether it did. Writes are
// idempotent: the same status again, or an older one, changes nothing. A
// status with the Deleted condition of a work being deleted removes the
// work. A status of a work that is gone is dropped.
func (s *Store) ApplyStatus(ctx context.Context, uid string, order generic.StatusOrder, status workv1.ManifestWorkStatus) (bool, error) {
	id, err := uuid.Parse(uid)
	if err != nil {
		return false, nil // no work of ours has it
	}
	if meta.IsStatusConditionTrue(status.Conditions, codec.WorkDeleted) {
		tag, err := s.pool.Exec(ctx, `DELETE FROM workwire_works WHERE uid = $1 AND deleting_at IS NOT NULL`, id)
		if err != nil {
			return false, err
		}
		if tag.RowsAffected() == 1 {
			return true, nil
		}
	}
	data, err := json.Marshal(status)
	if err != nil {
		return false, err
	}
	// generic.StatusOrder.Replaces in SQL (storetest checks the two agree):
	// a later generation, or the same and, unless either has no sequence,
	// a later sequence. A status without one is stored with sequence -1; a
	// snowflake ID has 63 bits.
	seq := int64(-1)
	if order.HasSequence {
		seq = int64(order.Sequence & (1<<63 - 1))
	}
	tag, err := s.pool.Exec(ctx, `UPDATE workwire_works SET status = $2, status_generation = $3, status_sequence = $4
		WHERE uid = $1 AND (status_generation < $3 OR status_generation = $3 AND ($4::bigint < 0 OR status_sequence < 0 OR status_sequence < $4::bigint))`,
		id, data, order.Version, seq)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

var listType = metav1.TypeMeta{APIVersion: workv1.GroupVersion.String(), Kind: "ManifestWorkList"}

// List returns the works opts selects, by cluster and name; its Continue
// is set when more follow.
func (s *Store) List(ctx context.Context, opts workstore.ListOptions) (*workv1.ManifestWorkList, error) {
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if opts.Cluster != "" {
		where = append(where, "cluster = "+arg(opts.Cluster))
	}
	if err := workstore.CheckSelector(opts.Selector); err != nil {
		return nil, err
	}
	if err := workstore.CheckLimit(opts.Limit); err != nil {
		return nil, err
	}
	if opts.Selector != nil {
		reqs, selectable := opts.Selector.Requirements()
		if !selectable {
			return &workv1.ManifestWorkList{TypeMeta: listType}, nil
		}
		for _, r := range reqs {
			cond, err := labelCondition(r, arg)
			if err != nil {
				return nil, err
			}
			where = append(where, cond)
		}
	}
	if opts.Continue != "" {
		after, err := workstore.ParseContinue(opts.Continue)
		if err != nil {
			return nil, err
		}
		where = append(where, fmt.Sprintf(`(cluster COLLATE "C", name COLLATE "C") > (%s, %s)`, arg(after.Cluster), arg(after.Name)))
	}
	query := `SELECT ` + columns + ` FROM workwire_works`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	// By bytes, whatever the database's collation: pages follow one
	// another as Memory's do.
	query += ` ORDER BY cluster COLLATE "C", name COLLATE "C"`
	if opts.Limit > 0 {
		query += " LIMIT " + arg(opts.Limit+1)
	}
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	works, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*workv1.ManifestWork, error) { return scan(r) })
	if err != nil {
		return nil, err
	}
	list := &workv1.ManifestWorkList{TypeMeta: listType}
	if opts.Limit > 0 && len(works) > opts.Limit {
		works = works[:opts.Limit]
		last := works[len(works)-1]
		list.Continue = workstore.Position{Cluster: last.Namespace, Name: last.Name}.Continue()
	}
	list.Items = make([]workv1.ManifestWork, len(works))
	for i, w := range works {
		list.Items[i] = *w
	}
	return list, nil
}

// labelCondition is the SQL of one label requirement over the labels
// column (a JSON object); arg adds a parameter and returns its
// placeholder.
func labelCondition(r labels.Requirement, arg func(any) string) (string, error) {
	key := r.Key()
	values := r.ValuesUnsorted()
	switch r.Operator() {
	case selection.Equals, selection.DoubleEquals:
		return "labels ->> " + arg(key) + " = " + arg(values[0]), nil
	case selection.NotEquals:
		return "(labels ->> " + arg(key) + ") IS DISTINCT FROM " + arg(values[0]), nil
	case selection.In:
		return "labels ->> " + arg(key) + " = ANY(" + arg(values) + ")", nil
	case selection.NotIn:
		k := arg(key)
		return "(labels ->> " + k + " IS NULL OR NOT (labels ->> " + k + " = ANY(" + arg(values) + ")))", nil
	case selection.Exists:
		return "labels ? " + arg(key), nil
	case selection.DoesNotExist:
		return "NOT (labels ? " + arg(key) + ")", nil
	}
	return "", apierrors.NewBadRequest(fmt.Sprintf("label selector %q: operator %s is not supported", r.String(), r.Operator()))
}
