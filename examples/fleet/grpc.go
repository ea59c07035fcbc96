package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/workwire/sdk-go/examples/fleet/internal/proc"
	"github.com/workwire/sdk-go/options/transporttest"
)

// grpcReplicas is how many replicas of workwire's gRPC broker a run over
// gRPC starts: over one PostgreSQL database, behind one address, as a
// Deployment behind a Service runs them.
const grpcReplicas = 2

// startGRPC makes a schema of the run's own in the database, starts
// grpcReplicas `workwire broker` processes over it, and a balancer in
// front of them (transporttest.Proxy: a new connection goes to a replica
// that answers), whose address the agents connect to. The hub writes its
// works into the database; the brokers serve them.
func (h *harness) startGRPC(ctx context.Context) error {
	if h.c.postgres == "" {
		return errors.New("-transport grpc needs a PostgreSQL database: -postgres-dsn or $WORKWIRE_POSTGRES_DSN")
	}
	dsn, drop, err := newSchema(ctx, h.c.postgres)
	if err != nil {
		return err
	}
	h.closers = append(h.closers, drop)
	bin, err := workwireBinary(ctx, h.dir)
	if err != nil {
		return err
	}
	var addrs, metrics []string
	for i := range grpcReplicas {
		port, err := freePort()
		if err != nil {
			return err
		}
		admin, err := freePort()
		if err != nil {
			return err
		}
		name := fmt.Sprintf("broker-%d", i)
		conf := filepath.Join(h.dir, name+".yaml")
		if err := os.WriteFile(conf, fmt.Appendf(nil, "listenAddress: 127.0.0.1:%d\n", port), 0o644); err != nil {
			return err
		}
		p, err := proc.Start(h.dir, name, bin, "broker", "-config", conf, "-admin-address", fmt.Sprintf("127.0.0.1:%d", admin),
			"-services", "postgres", "-postgres-dsn", dsn, "-authn", "none", "-authz", "none")
		if err != nil {
			return err
		}
		h.brokers = append(h.brokers, p)
		h.readyz = append(h.readyz, fmt.Sprintf("http://127.0.0.1:%d/readyz", admin))
		addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", port))
		metrics = append(metrics, fmt.Sprintf("http://127.0.0.1:%d/metrics", admin))
	}
	for i, p := range h.brokers {
		if err := awaitReady(ctx, h.readyz[i], p); err != nil {
			return err
		}
	}
	proxy, err := transporttest.NewProxy(addrs[0], addrs[1:]...)
	if err != nil {
		return err
	}
	h.closers = append(h.closers, func() { _ = proxy.Close() })
	h.c.broker, h.c.postgres, h.c.metrics = proxy.Addr(), dsn, strings.Join(metrics, ",")
	return nil
}

// awaitReady waits until the admin port's /readyz answers 200, or p ends.
func awaitReady(ctx context.Context, readyz string, p *proc.Process) error {
	deadline := time.Now().Add(2 * time.Minute)
	client := http.Client{Timeout: 5 * time.Second}
	for {
		resp, err := client.Get(readyz)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = errors.New(resp.Status)
		}
		if err := p.Exited(); err != nil {
			return err
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s not ready (%s): %v", p.Name, readyz, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// newSchema makes a schema in the database dsn names, and returns dsn
// with that schema first in its search_path, and what drops it.
func newSchema(ctx context.Context, dsn string) (string, func(), error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return "", nil, fmt.Errorf("-postgres-dsn: %w", err)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	schema := "fleet_" + hex.EncodeToString(b[:])
	exec := func(ctx context.Context, sql string) error {
		conn, err := pgx.ConnectConfig(ctx, cfg.Copy())
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return "", nil, fmt.Errorf("make a schema for the run: %w", err)
	}
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			fmt.Fprintf(os.Stderr, "drop schema %s: %v\n", schema, err)
		}
	}
	return withSearchPath(dsn, schema), drop, nil
}

// withSearchPath adds search_path=schema to a URL or key=value DSN.
func withSearchPath(dsn, schema string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " search_path=" + schema
}

// workwireBinary builds workwire's program (cmd/workwire, a module of its
// own) from the source tree the harness runs in, into dir.
func workwireBinary(ctx context.Context, dir string) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		src := filepath.Join(d, "cmd", "workwire")
		if _, err := os.Stat(filepath.Join(src, "go.mod")); err == nil {
			bin := filepath.Join(dir, "workwire")
			cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
			cmd.Dir = src
			if out, err := cmd.CombinedOutput(); err != nil {
				return "", fmt.Errorf("build %s: %v\n%s", src, err, out)
			}
			return bin, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("-transport grpc runs workwire's broker, built from the source tree: run the harness inside it (%s is not)", wd)
		}
	}
}
