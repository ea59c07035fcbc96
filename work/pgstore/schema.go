package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// migrations are the schema's versions, in order: migrations[i] takes the
// schema from version i to i+1. A released step never changes; a new one
// is appended.
var migrations = []string{
	// 1: works, their statuses, and a notification per change.
	`
CREATE SEQUENCE workwire_revision;

CREATE TABLE workwire_works (
	uid               uuid PRIMARY KEY,
	cluster           text NOT NULL,
	name              text NOT NULL,
	generation        bigint NOT NULL,
	revision          bigint NOT NULL DEFAULT nextval('workwire_revision'),
	labels            jsonb NOT NULL DEFAULT '{}',
	work              jsonb NOT NULL,
	created_at        timestamptz NOT NULL DEFAULT now(),
	deleting_at       timestamptz,
	status            jsonb,
	status_generation bigint NOT NULL DEFAULT 0,
	status_sequence   bigint NOT NULL DEFAULT 0,
	UNIQUE (cluster, name)
);

CREATE INDEX workwire_works_labels ON workwire_works USING gin (labels);

-- Every write gives the row a new revision: its resourceVersion.
CREATE FUNCTION workwire_revise() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	NEW.revision := nextval('workwire_revision');
	RETURN NEW;
END $$;

CREATE TRIGGER workwire_revise BEFORE UPDATE ON workwire_works
	FOR EACH ROW EXECUTE FUNCTION workwire_revise();

-- Every change is announced on the channel "<schema>.workwire_works", at
-- commit: "<op> <uid> <cluster> <revision>", op c (created), s (its spec,
-- labels, annotations or deletion changed), t (none of them did: its
-- status, say), d (deleted).
CREATE FUNCTION workwire_notify() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	op text;
	r workwire_works;
BEGIN
	IF TG_OP = 'INSERT' THEN
		op := 'c'; r := NEW;
	ELSIF TG_OP = 'DELETE' THEN
		op := 'd'; r := OLD;
	ELSIF NEW.generation = OLD.generation AND NEW.deleting_at IS NOT DISTINCT FROM OLD.deleting_at AND NEW.work = OLD.work THEN
		op := 't'; r := NEW;
	ELSE
		op := 's'; r := NEW;
	END IF;
	PERFORM pg_notify(TG_TABLE_SCHEMA || '.workwire_works', op || ' ' || r.uid || ' ' || r.cluster || ' ' || r.revision);
	RETURN NULL;
END $$;

CREATE TRIGGER workwire_notify AFTER INSERT OR UPDATE OR DELETE ON workwire_works
	FOR EACH ROW EXECUTE FUNCTION workwire_notify();
`,
}

// SchemaVersion is the version of the schema this package writes.
var SchemaVersion = len(migrations)

// migrate brings the schema of the connection's current schema (its
// search_path's first) to SchemaVersion, one step per transaction, under
// an advisory lock, so replicas starting together migrate once. A schema
// newer than this package's is refused: an older replica must not write
// into it.
func migrate(ctx context.Context, conn *pgx.Conn) error {
	for {
		done, err := migrateStep(ctx, conn)
		if err != nil || done {
			return err
		}
	}
}

// migrateStep applies the next step, if one is due, and reports whether
// the schema is current.
func migrateStep(ctx context.Context, conn *pgx.Conn) (current bool, err error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// One lock per schema: the key is the schema's name hashed.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.workwire_schema'))`); err != nil {
		return false, fmt.Errorf("lock the schema: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS workwire_schema (version int NOT NULL)`); err != nil {
		return false, fmt.Errorf("schema version table: %w", err)
	}
	var version int
	switch err := tx.QueryRow(ctx, `SELECT version FROM workwire_schema`).Scan(&version); err {
	case nil:
	case pgx.ErrNoRows:
		if _, err := tx.Exec(ctx, `INSERT INTO workwire_schema (version) VALUES (0)`); err != nil {
			return false, err
		}
	default:
		return false, fmt.Errorf("read the schema version: %w", err)
	}
	switch {
	case version > SchemaVersion:
		return false, fmt.Errorf("the database's schema is at version %d, newer than this program's %d: upgrade the program", version, SchemaVersion)
	case version == SchemaVersion:
		return true, tx.Commit(ctx)
	}
	if _, err := tx.Exec(ctx, migrations[version]); err != nil {
		return false, fmt.Errorf("migrate the schema to version %d: %w", version+1, err)
	}
	if _, err := tx.Exec(ctx, `UPDATE workwire_schema SET version = $1`, version+1); err != nil {
		return false, err
	}
	return false, tx.Commit(ctx)
}
