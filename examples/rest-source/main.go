// Command rest-source is a service over its own database that delivers
// ManifestWorks to managed clusters and gathers their status: an HTTP JSON API (see api.go) that stores works in the
// database, and workwire carrying them to agents — over its gRPC broker
// (work/storeservice: agents connect to this service) or through an MQTT
// broker (a generic source client over the same database).
//
//	go run ./examples/rest-source
//
// runs a demonstration with no setup: an in-process database and broker,
// two in-process agents, and a session against the API — creates, a
// conflict, bad requests, statuses coming back, an update with its version
// and a stale one, a paged list, a delete held until the agent reports it
// Deleted — printed as curl commands, exiting 0 only when every answer was
// the one expected. With -serve it serves until interrupted instead, for
// curl:
//
//	go run ./examples/rest-source -serve -http-addr 127.0.0.1:8080 -agents 2
//	curl -s -XPOST localhost:8080/clusters/cluster1/works -d '{"metadata":{"name":"web","labels":{"app":"web"}},
//	  "spec":{"workload":{"manifests":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web","namespace":"default"},"data":{"a":"1"}}]}}}'
//	curl -s localhost:8080/clusters/cluster1/works/web/status
//	curl -s 'localhost:8080/works?labelSelector=app%3Dweb&limit=10'
//	curl -s -XPUT localhost:8080/clusters/cluster1/works/web -d '{"metadata":{"name":"web","resourceVersion":"<from the GET>"},"spec":...}'
//	curl -s -XDELETE localhost:8080/clusters/cluster1/works/web
//
// -database postgres://user@host:5432/db keeps the works in PostgreSQL
// (work/pgstore; the schema is created and migrated at start), where
// several replicas of the service may share them; -transport mqtt
// delivers through an MQTT broker (-broker, or an embedded one).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/jackc/pgx/v5/pgxpool"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/examples/work-agent/agent"
	"github.com/workwire/sdk-go/examples/work-agent/fakecluster"
	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc"
	"github.com/workwire/sdk-go/options/grpc/server"
	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/options/mqtt/mqtttest"
	"github.com/workwire/sdk-go/work"
	"github.com/workwire/sdk-go/work/pgstore"
	"github.com/workwire/sdk-go/work/storeservice"
	"github.com/workwire/sdk-go/work/workstore"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout)
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "rest-source:", err)
		os.Exit(1)
	}
}

type config struct {
	database  string
	transport string
	broker    string
	grpcAddr  string
	httpAddr  string
	agents    int
	serve     bool
	timeout   time.Duration
}

func run(ctx context.Context, args []string, out io.Writer) error {
	out = &lockedWriter{w: out} // the agents' goroutines report to it too
	fs := flag.NewFlagSet("rest-source", flag.ContinueOnError)
	var cfg config
	fs.StringVar(&cfg.database, "database", "", "PostgreSQL URL, postgres://user@host:5432/db (default: an in-process database)")
	fs.StringVar(&cfg.transport, "transport", "grpc", "how works reach agents: grpc (this service's broker) or mqtt")
	fs.StringVar(&cfg.broker, "broker", "", "with -transport mqtt, the broker's host:port (default: an embedded one)")
	fs.StringVar(&cfg.grpcAddr, "grpc-addr", "127.0.0.1:0", "with -transport grpc, where agents connect")
	fs.StringVar(&cfg.httpAddr, "http-addr", "127.0.0.1:0", "where the API listens")
	fs.IntVar(&cfg.agents, "agents", 2, "in-process agents (cluster1, cluster2, ...), applying to in-memory clusters")
	fs.BoolVar(&cfg.serve, "serve", false, "serve until interrupted instead of running the demonstration")
	fs.DurationVar(&cfg.timeout, "timeout", time.Minute, "the demonstration gives up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if cfg.transport != "grpc" && cfg.transport != "mqtt" {
		return fmt.Errorf("-transport %q: want grpc or mqtt", cfg.transport)
	}
	if cfg.agents < 0 || !cfg.serve && cfg.agents == 0 {
		return fmt.Errorf("-agents %d: the demonstration needs at least one", cfg.agents)
	}
	svc, err := start(ctx, cfg, out)
	if err != nil {
		return err
	}
	defer svc.stop()
	if cfg.serve {
		<-ctx.Done()
		return nil
	}
	demoCtx, stop := context.WithTimeout(ctx, cfg.timeout)
	defer stop()
	return demo(demoCtx, svc.base, out)
}

// lockedWriter writes to w one Write at a time.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// service is the running service: its database, what delivers works to
// agents, the in-process agents, and the API at base.
type service struct {
	base  string
	store workstore.Store
	stop  func()
}

// start starts the service of cfg; stop stops it and waits for it.
func start(ctx context.Context, cfg config, out io.Writer) (_ *service, err error) {
	ctx, cancel := context.WithCancel(ctx)
	var bg sync.WaitGroup
	var cleanup []func()
	stop := func() {
		cancel() // what runs in the background ends
		bg.Wait()
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	store, closeStore, err := openStore(ctx, cfg.database, out)
	if err != nil {
		return nil, err
	}
	cleanup = append(cleanup, closeStore)
	agentConfig, err := deliver(ctx, cfg, store, &bg, out)
	if err != nil {
		return nil, err
	}
	for i := range cfg.agents {
		cluster := fmt.Sprintf("cluster%d", i+1)
		holder, err := work.NewClientHolderBuilder(agentConfig).WithClusterName(cluster).WithLogger(logr.Discard()).NewClientHolder()
		if err != nil {
			return nil, err
		}
		c := fakecluster.New()
		bg.Go(func() {
			if err := agent.Run(ctx, agent.Config{Holder: holder, Cluster: cluster, Client: c.Client, Mapper: c.Mapper}, io.Discard); err != nil {
				fmt.Fprintf(out, "agent of %s: %v\n", cluster, err)
			}
		})
	}
	lis, err := net.Listen("tcp", cfg.httpAddr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: api{store: store}.handler(), ReadHeaderTimeout: 10 * time.Second}
	bg.Go(func() { _ = srv.Serve(lis) })
	bg.Go(func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	})
	base := "http://" + lis.Addr().String()
	fmt.Fprintf(out, "API on %s, %d agent(s)\n", base, cfg.agents)
	return &service{base: base, store: store, stop: stop}, nil
}

// publishRetry paces the attempts to send a change.
var publishRetry = options.Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second}

// openStore opens PostgreSQL at url, or an in-process database.
func openStore(ctx context.Context, url string, out io.Writer) (workstore.Store, func(), error) {
	if url == "" {
		fmt.Fprintln(out, "database: in-process (use -database postgres://... for PostgreSQL)")
		return workstore.NewMemory(), func() {}, nil
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, nil, fmt.Errorf("-database: %w", err)
	}
	store, err := pgstore.Open(ctx, pool)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	fmt.Fprintln(out, "database: PostgreSQL, schema migrated")
	return store, pool.Close, nil
}

// deliver starts what carries the store's works to agents, and returns how
// agents connect.
func deliver(ctx context.Context, cfg config, store workstore.Store, bg *sync.WaitGroup, out io.Writer) (options.TransportConfig, error) {
	if cfg.transport == "grpc" {
		svc, err := storeservice.New(store, server.DefaultSourceID, storeservice.WithLogger(logr.Discard()))
		if err != nil {
			return nil, err
		}
		srv, err := server.New(server.Config{}, server.WithService(codec.ManifestBundlesDataType.String(), svc), server.WithLogger(logr.Discard()))
		if err != nil {
			return nil, err
		}
		lis, err := net.Listen("tcp", cfg.grpcAddr)
		if err != nil {
			return nil, err
		}
		ready := make(chan struct{})
		bg.Go(func() { _ = svc.Run(ctx, ready) })
		bg.Go(func() { _ = srv.Serve(ctx, lis) })
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		fmt.Fprintf(out, "gRPC broker for agents on %s\n", lis.Addr())
		return &grpc.Config{ServerAddress: lis.Addr().String()}, nil
	}
	addr := cfg.broker
	if addr == "" {
		b, err := mqtttest.Start()
		if err != nil {
			return nil, err
		}
		bg.Go(func() { <-ctx.Done(); _ = b.Close() })
		addr = b.Addr()
		fmt.Fprintf(out, "embedded MQTT broker on %s\n", addr)
	}
	mqttConfig := &mqtt.Config{BrokerHost: addr}
	tr, err := mqttConfig.NewTransport()
	if err != nil {
		return nil, err
	}
	source, err := generic.NewSourceClient(server.DefaultSourceID, tr, workstore.Lister(store), codec.StatusHash,
		[]generic.Codec[*workv1.ManifestWork]{codec.NewManifestBundleCodec()}, generic.WithLogger(logr.Discard()))
	if err != nil {
		return nil, err
	}
	if err := source.Subscribe(workstore.StatusHandler(store)); err != nil {
		return nil, err
	}
	if err := source.Start(ctx); err != nil {
		return nil, err
	}
	bg.Go(func() { <-ctx.Done(); _ = source.Close(context.Background()) })
	// Every change of a work's spec, whoever made it, goes to its agent;
	// a publish that fails is repaired by the agent's next resync.
	ready := make(chan struct{})
	bg.Go(func() {
		_ = store.Watch(ctx, func(c workstore.Change) {
			if c.Op != workstore.Created && c.Op != workstore.SpecChanged {
				return
			}
			// The database may be away for a moment: try again, in
			// order, before the next change.
			for attempt := 0; ctx.Err() == nil; attempt++ {
				w, err := store.GetByUID(ctx, c.UID)
				if apierrors.IsNotFound(err) {
					return // gone since
				}
				if err == nil {
					err = source.Publish(ctx, codec.SpecEventType(w), w)
				}
				if err == nil || attempt == 7 {
					if err != nil {
						fmt.Fprintf(out, "cannot publish work %s; the agent's next resync will: %v\n", c.UID, err)
					}
					return
				}
				select {
				case <-ctx.Done():
				case <-time.After(publishRetry.Delay(attempt)):
				}
			}
		}, ready)
	})
	select {
	case <-ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return mqttConfig, nil
}
