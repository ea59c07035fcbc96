// Command fleet runs a fleet as deployments run one: a broker, one hub and
// many agents, each part a process of its own on this machine, every agent
// with its own connection and cluster, and drives it through the phases of
// a fleet's life, measuring each part:
//
//	go -C examples/fleet run . -clusters 1000 -works-per-cluster 100
//	go -C examples/fleet run . -short      # CI's size
//	go -C examples/fleet run . -short -transport grpc   # two gRPC brokers over $WORKWIRE_POSTGRES_DSN
//
// Phases, in order:
//
//	raw            over MQTT and NATS, before the agents start: the same
//	               number of same-size spec events from the hub's process
//	               through the broker to each agent's connection, and a
//	               same-size status event back for each, with nothing above
//	               the transport → every status back at the hub; deliver,
//	               update, delete and agent-restart are set against it
//	deliver        the hub creates every work → every one Applied at the hub
//	update         the hub changes every work → every one Applied at its new generation
//	steady         the hub changes -steady-rate works a second for -steady-for
//	               → every one Applied at its generation (and how long after)
//	delete         the hub deletes one in ten → each confirmed by its agent
//	agent-restart  a tenth of the agent hosts are killed and started again,
//	               empty → every agent holds its works again, all Applied
//	hub-restart    over gRPC, where the hub keeps its works in the brokers'
//	               database: the hub changes every work, and once the first
//	               statuses are in it is killed and started again → every
//	               one Applied at its new generation
//	broker-fault   the hub creates a tenth more works, and once the first is
//	               Applied the broker's first server is killed (one of three
//	               NATS servers; one of two gRPC replicas, whose agents move
//	               to the other; Mosquitto, all of it) and started again after
//	               -fault-for → every work Applied (and how long after)
//	broker-stall   the same, with the broker's last server stopped
//	               (SIGSTOP: its connections open, nothing answering, as a
//	               network that hangs) for -stall-for and then continued
//
// For each it reports the time to converge, works/s (and its share of
// raw's), first-status latency (p50, p99, max, from the library's own
// histogram) and the specs sent again; for each process, its peak resident set and CPU seconds. A table,
// and with -json one JSON object (lost: the works that did not converge).
//
// The harness runs its parts as `fleet hub` and `fleet agents`, the same
// program; they are not for running by hand. It runs on Linux, which tells
// it each process's peak RSS and CPU time.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/workwire/sdk-go/examples/internal/cmdutil"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc"
	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/options/nats"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	run := runHarness
	args := os.Args[1:]
	if len(args) > 0 {
		switch args[0] {
		case "hub":
			run, args = runHub, args[1:]
		case "agents":
			run, args = runAgents, args[1:]
		}
	}
	err := run(ctx, args)
	stop()
	cmdutil.Exit("fleet", err)
}

// common is what the harness tells every part.
type common struct {
	transport, broker, control string
	clusters, worksPerCluster  int
	manifestBytes              int
	replicas                   int // of a NATS stream
	// Over gRPC: the database the brokers serve, and their admin ports'
	// metrics, comma-separated.
	postgres, metrics string
	verbosity         int // of the hub's and agents' logs
}

// logger is the parts' logger: to their log (stderr) at -v, none at 0.
func (c *common) logger() logr.Logger {
	if c.verbosity <= 0 {
		return logr.Discard()
	}
	return funcr.New(func(prefix, args string) {
		fmt.Fprintln(os.Stderr, time.Now().Format(time.StampMicro), prefix, args)
	}, funcr.Options{Verbosity: c.verbosity})
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.transport, "transport", "mqtt", "the broker's kind: mqtt (a Mosquitto), nats (a cluster of three NATS servers, the stream replicated on each) or grpc (two replicas of workwire's broker over one PostgreSQL database, behind one address)")
	fs.StringVar(&c.broker, "broker", "", "the broker's address")
	fs.StringVar(&c.control, "control", "", "the file to write the control port's address to")
	fs.IntVar(&c.clusters, "clusters", 200, "clusters in the fleet")
	fs.IntVar(&c.worksPerCluster, "works-per-cluster", 20, "works per cluster")
	fs.IntVar(&c.manifestBytes, "manifest-bytes", 1000, "size of each work's Deployment manifest")
	fs.IntVar(&c.replicas, "replicas", 0, "the NATS stream's replicas (default: one per server the harness starts)")
	fs.StringVar(&c.postgres, "postgres-dsn", os.Getenv("WORKWIRE_POSTGRES_DSN"), "over gRPC, the PostgreSQL database whose works the brokers serve (the harness makes a schema of its own in it, and drops it after) (default $WORKWIRE_POSTGRES_DSN)")
	fs.StringVar(&c.metrics, "metrics", "", "over gRPC, the brokers' metrics URLs, comma-separated")
	fs.IntVar(&c.verbosity, "v", 0, "verbosity of the hub's and the agents' logs, in the processes' log files (2: every reconnect and every send that failed)")
}

// args are the flags that tell a part what c says.
func (c *common) args() []string {
	return []string{"-transport", c.transport, "-broker", c.broker, "-clusters", fmt.Sprint(c.clusters),
		"-works-per-cluster", fmt.Sprint(c.worksPerCluster), "-manifest-bytes", fmt.Sprint(c.manifestBytes),
		"-replicas", fmt.Sprint(c.replicas), "-postgres-dsn", c.postgres, "-metrics", c.metrics, "-v", fmt.Sprint(c.verbosity)}
}

// transportConfig is a client's config of the broker.
func (c *common) transportConfig() (options.TransportConfig, error) {
	switch c.transport {
	case "mqtt":
		return &mqtt.Config{BrokerHost: c.broker}, nil
	case "nats":
		return &nats.Config{URL: c.broker, Replicas: c.replicas}, nil
	case "grpc":
		return &grpc.Config{ServerAddress: c.broker}, nil
	}
	return nil, fmt.Errorf("-transport %q: want mqtt, nats or grpc", c.transport)
}
