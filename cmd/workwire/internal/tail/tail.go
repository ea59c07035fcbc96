// Package tail is `workwire tail`: the events on a broker, decoded, as
// they pass, read with the config file a client of that broker uses,
// without taking any of them from the sources and agents it serves.
package tail

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/go-logr/logr"

	"github.com/workwire/sdk-go/cmd/workwire/internal/cli"
	"github.com/workwire/sdk-go/cmd/workwire/internal/eventline"
	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc"
	"github.com/workwire/sdk-go/options/kafka"
	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/options/nats"
	"github.com/workwire/sdk-go/options/pubsub"
)

const long = `
Tail prints the events on a broker as they pass, one line each (time, type,
cluster, resource ID, version, sequence ID, size, source) or, with -o json,
each whole event on a line. It reads the broker's address and credentials
from the config file of a client of that broker (-transport says which kind),
and takes nothing from the sources and agents the broker serves:

  mqtt   subscribes with a client ID of its own, a clean session, no will,
         and never under a $share group: the broker copies every event to
         it, and shared subscriptions (the sources' sharedGroup) keep theirs.
  kafka  reads as a consumer group of its own (workwire-tail-<random>),
         from the newest offsets: the sources' and agents' groups keep their
         partitions and offsets.
  nats   reads the stream through ephemeral consumers of its own, which the
         server deletes a minute after tail stops, never the durable
         consumers of sources and agents; resync requests are plain NATS,
         copied to every subscriber.
  pubsub reads through subscriptions of its own, one per topic, which it
         creates when it starts (it needs the Pub/Sub Editor role:
         subscriptions.create and .delete, topics.attachSubscription) and
         deletes when it stops;
         Pub/Sub deletes those of a tail that was killed once they have been
         unread for a day. The subscriptions of sources and agents keep
         their messages.
  grpc   subscribes to the workwire broker as the source -source names (its
         statuses and spec resync requests) and as the agent of the cluster
         -cluster names (its specs and status resync requests); the broker
         copies every event to each subscriber. A status waits for room in a
         slow tail's queue as for any source's, and a broker with Services
         counts tail among the cluster's subscribers: keep tail for looking,
         not for running beside a fleet for days.

Filters narrow what is printed: -cluster, -source (the source the event
comes from or is for), -data-type (in full, or its resource: manifestbundles),
-event-type (its subresource and action, spec.create_request, or the
action alone), -resource (the resource ID).`

// Command is `workwire tail`.
func Command() *cli.Command {
	return &cli.Command{
		Name:  "tail",
		Usage: "-transport mqtt|kafka|nats|pubsub|grpc -config FILE [filters] [-n N] [-o text|json]",
		Short: "print the events on a broker as they pass, decoded",
		Long:  long,
		Flags: cli.FlagsOnly(func() *flags { return &flags{} }),
	}
}

type flags struct {
	transport, config string
	filter
	count   int
	out     cli.Output
	logging cli.Logging
}

// Register implements cli.Runner.
func (f *flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.transport, "transport", "", "the broker's kind: mqtt, kafka, nats, pubsub or grpc (required)")
	fs.StringVar(&f.config, "config", "", "a client's config file of that broker, YAML or JSON (required)")
	fs.StringVar(&f.cluster, "cluster", "", "only events of this cluster")
	fs.StringVar(&f.source, "source", "", "only events from or for this source")
	fs.StringVar(&f.dataType, "data-type", "", "only events of this data type (in full, or its resource)")
	fs.StringVar(&f.eventType, "event-type", "", "only events of this subresource and action (spec.create_request), or action (resync_request)")
	fs.StringVar(&f.resource, "resource", "", "only events of this resource ID")
	fs.IntVar(&f.count, "n", 0, "stop after printing this many events (0: until interrupted)")
	f.out.Register(fs)
	f.logging.Register(fs)
}

// Run implements cli.Runner.
func (f *flags) Run(ctx context.Context, env *cli.Env) error {
	log, err := f.logging.Logger(env.Stderr)
	if err != nil {
		return err
	}
	if err := f.out.Check(); err != nil {
		return err
	}
	switch {
	case f.transport == "":
		return cli.Required("transport")
	case f.config == "":
		return cli.Required("config")
	case f.count < 0:
		return cli.Usagef("-n %d: want 0 or more", f.count)
	}
	tr, subs, err := f.open(log)
	if err != nil {
		return err
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	p := &printer{w: env.Stdout, filter: f.filter, json: f.out.JSON(), left: f.count, done: stop}
	if err := tr.Start(ctx, subs, p); err != nil {
		closeErr := tr.Close(context.Background())
		if ctx.Err() != nil {
			return nil // interrupted, or done, before it connected
		}
		return errors.Join(fmt.Errorf("connect: %w", err), closeErr)
	}
	log.V(0).Info("tailing", "transport", f.transport, "config", f.config)
	<-ctx.Done()
	if err := tr.Close(context.Background()); err != nil {
		return err
	}
	return p.err()
}

// open loads the config file and makes the transport's identity tail's
// own, so that what it reads is a copy (see the command's text).
func (f *flags) open(log logr.Logger) (options.Transport, []options.Subscription, error) {
	suffix := "workwire-tail-" + random()
	every := func() []options.Subscription {
		return []options.Subscription{{Role: options.RoleSpec}, {Role: options.RoleStatus}, {Role: options.RoleSpecResync}, {Role: options.RoleStatusResync}}
	}
	switch f.transport {
	case "mqtt":
		cfg, err := mqtt.LoadConfig(f.config)
		if err != nil {
			return nil, nil, cli.UsageError{Err: err}
		}
		cfg.ClientID, cfg.SharedGroup, cfg.PersistentSession, cfg.Will = suffix, "", false, nil
		// Outside a $share group, narrower topics are only less to read.
		subs := every()
		for i := range subs {
			subs[i].Source, subs[i].Cluster = f.source, f.cluster
		}
		tr, err := mqtt.New(cfg, mqtt.WithLogger(log))
		return tr, subs, err
	case "kafka":
		cfg, err := kafka.LoadConfig(f.config)
		if err != nil {
			return nil, nil, cli.UsageError{Err: err}
		}
		cfg.GroupID, cfg.InitialOffset, cfg.ClientID = suffix, "newest", suffix
		tr, err := kafka.New(cfg, kafka.WithLogger(log))
		return tr, every(), err
	case "nats":
		cfg, err := nats.LoadConfig(f.config)
		if err != nil {
			return nil, nil, cli.UsageError{Err: err}
		}
		// Subscriptions that name no source and no cluster read through
		// ephemeral consumers.
		tr, err := nats.New(cfg, nats.WithLogger(log))
		return tr, every(), err
	case "grpc":
		cfg, err := grpc.LoadConfig(f.config)
		if err != nil {
			return nil, nil, cli.UsageError{Err: err}
		}
		if f.source == "" && f.cluster == "" {
			return nil, nil, cli.Usagef("-transport grpc subscribes as a source or a cluster's agent: name -source, -cluster or both")
		}
		var subs []options.Subscription
		if f.source != "" {
			subs = append(subs, options.SourceSubscriptions(f.source, nil)...)
		}
		if f.cluster != "" {
			subs = append(subs, options.AgentSubscriptions(f.cluster, nil)...)
		}
		tr, err := grpc.New(cfg, grpc.WithLogger(log))
		return tr, subs, err
	case "pubsub":
		cfg, err := pubsub.LoadConfig(f.config)
		if err != nil {
			return nil, nil, cli.UsageError{Err: err}
		}
		// Subscriptions that name no source and no cluster read through
		// subscriptions of the transport's own, never those the file names.
		cfg.Subscriptions, cfg.Provision = pubsub.Subscriptions{}, false
		tr, err := pubsub.New(cfg, pubsub.WithLogger(log))
		return tr, every(), err
	}
	return nil, nil, cli.Usagef("-transport %q: want mqtt, kafka, nats, pubsub or grpc", f.transport)
}

func random() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// filter is what the flags let through.
type filter struct{ cluster, source, dataType, eventType, resource string }

func (f filter) keeps(evt *cloudevents.Event) bool {
	ext := func(name string) string { s, _, _ := types.StringExtension(evt, name); return s }
	if f.cluster != "" && ext(types.ExtClusterName) != f.cluster {
		return false
	}
	if f.source != "" && evt.Source() != f.source && ext(types.ExtOriginalSource) != f.source {
		return false
	}
	if f.resource != "" && ext(types.ExtResourceID) != f.resource {
		return false
	}
	if f.dataType == "" && f.eventType == "" {
		return true
	}
	et, err := types.ParseEventType(evt.Type())
	if err != nil {
		return false
	}
	if f.dataType != "" && et.DataType.String() != f.dataType && et.DataType.Resource != f.dataType && et.DataType.Singular().String() != f.dataType {
		return false
	}
	if f.eventType != "" && string(et.Action) != f.eventType && string(et.SubResource)+"."+string(et.Action) != f.eventType {
		return false
	}
	return true
}

// printer prints what the transport delivers, as it comes.
type printer struct {
	w      io.Writer
	filter filter
	json   bool
	done   func() // called once left reaches 0

	mu      sync.Mutex
	left    int // events still to print, if counting
	counted bool
	werr    error
}

func (p *printer) Deliver(d *options.Delivery) {
	defer d.Done()
	if !p.filter.keeps(d.Event) {
		return
	}
	var line string
	if p.json {
		b, err := json.Marshal(d.Event)
		if err != nil {
			line = fmt.Sprintf(`{"error":%q}`, err.Error())
		} else {
			line = string(b)
		}
	} else {
		line = eventline.Format(d.Event)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.werr != nil || p.counted {
		return
	}
	if _, err := io.WriteString(p.w, line+"\n"); err != nil {
		p.werr = err // stdout closed (a pipe to head): stop
		p.done()
		return
	}
	if p.left > 0 {
		if p.left--; p.left == 0 {
			p.counted = true
			p.done()
		}
	}
}

func (p *printer) Malformed(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.werr == nil && !p.counted {
		_, _ = fmt.Fprintf(p.w, "malformed: %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
	}
}

func (p *printer) Connected() {}

func (p *printer) err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.werr
}
