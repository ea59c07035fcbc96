// Package pgtest gives a test a schema of its own in the PostgreSQL that
// WORKWIRE_POSTGRES_DSN names, and skips the test when it names none.
package pgtest

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DSNEnv names the variable that holds the PostgreSQL connection string,
// e.g. postgres://postgres@127.0.0.1:5432/test.
const DSNEnv = "WORKWIRE_POSTGRES_DSN"

// Config returns the pool config of a new schema, dropped when t ends:
// its search_path starts with the schema, so what a test writes is its
// own. It skips t unless DSNEnv is set.
func Config(t testing.TB) *pgxpool.Config {
	t.Helper()
	dsn := os.Getenv(DSNEnv)
	if dsn == "" {
		t.Skipf("%s is not set: no PostgreSQL to test against", DSNEnv)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("%s: %v", DSNEnv, err)
	}
	schema := "test_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:16]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig.Copy())
	if err != nil {
		t.Fatalf("connect to %s: %v", DSNEnv, err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig.Copy())
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer func() { _ = conn.Close(context.Background()) }()
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.ConnConfig.RuntimeParams["application_name"] = schema
	return cfg
}

// DSN returns the connection string of DSNEnv with the search_path of a
// new schema, dropped when t ends, for a program that takes a URL. It
// skips t unless DSNEnv is set.
func DSN(t testing.TB) string {
	t.Helper()
	cfg := Config(t)
	dsn := os.Getenv(DSNEnv)
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + "search_path=" + cfg.ConnConfig.RuntimeParams["search_path"]
}

// Pool returns a pool over Config(t)'s schema, closed when t ends.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return PoolOf(t, Config(t))
}

// PoolOf returns a pool of cfg, closed when t ends (before the schema is
// dropped).
func PoolOf(t testing.TB, cfg *pgxpool.Config) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg.Copy())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Drop ends every connection of cfg's schema — its pools' and the
// watches' over it (whose application_name names the schema) — as a
// restarted database does, and returns how many it ended.
func Drop(t testing.TB, cfg *pgxpool.Config) int {
	t.Helper()
	conn, err := pgx.ConnectConfig(context.Background(), cfg.ConnConfig.Copy())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	var n int
	err = conn.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE pid <> pg_backend_pid() AND datname = current_database() AND application_name LIKE '%' || $1 || '%'`,
		cfg.ConnConfig.RuntimeParams["search_path"]).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// RestartEnv names a command that restarts the PostgreSQL of DSNEnv (for
// example "pg_ctlcluster --skip-systemctl-redirect 15 main restart"): set,
// tests that restart it run; it disrupts every other user of the server.
const RestartEnv = "WORKWIRE_POSTGRES_RESTART"

// Terminate ends the connections whose application_name is name, as a
// restarted database or a network fault would, and returns how many it
// ended.
func Terminate(t testing.TB, pool *pgxpool.Pool, name string) int {
	t.Helper()
	var n int
	err := pool.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE pid <> pg_backend_pid() AND datname = current_database() AND application_name = $1`, name).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
