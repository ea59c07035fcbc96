package interop

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ocmpubsub "open-cluster-management.io/sdk-go/pkg/cloudevents/generic/options/v2/pubsub"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/pubsub"
	"github.com/workwire/sdk-go/options/pubsub/pubsubtest"
	"github.com/workwire/sdk-go/options/transporttest"
	"github.com/workwire/sdk-go/work"
)

// ocmPubSubFiles writes the Pub/Sub config files an OCM deployment gives
// its hub (source topics and subscriptions) and its agent (the agent's),
// which both OCM's peers and workwire's load.
func ocmPubSubFiles(t *testing.T, s *pubsubtest.Server, source, cluster string) (hubFile, agentFile string) {
	p := pubsubtest.ProjectID
	hubFile = writeFile(t, "pubsub-hub.yaml", fmt.Sprintf(`endpoint: %s
projectID: %s
disableTLS: true
topics:
  sourceEvents: projects/%[2]s/topics/sourceevents
  sourceBroadcast: projects/%[2]s/topics/sourcebroadcast
subscriptions:
  agentEvents: projects/%[2]s/subscriptions/agentevents-%[3]s
  agentBroadcast: projects/%[2]s/subscriptions/agentbroadcast-%[3]s
`, s.Addr(), p, source))
	agentFile = writeFile(t, "pubsub-agent.yaml", fmt.Sprintf(`endpoint: %s
projectID: %s
disableTLS: true
topics:
  agentEvents: projects/%[2]s/topics/agentevents
  agentBroadcast: projects/%[2]s/topics/agentbroadcast
subscriptions:
  sourceEvents: projects/%[2]s/subscriptions/sourceevents-%[3]s
  sourceBroadcast: projects/%[2]s/subscriptions/sourcebroadcast-%[3]s
`, s.Addr(), p, cluster))
	return hubFile, agentFile
}

// provisionPubSub makes the topics and the subscriptions of source and
// cluster as a workwire transport with Config.Provision makes them (the
// filters OCM's layout has), before OCM's peers, which make none, start.
func provisionPubSub(t *testing.T, s *pubsubtest.Server, source, cluster string) {
	for _, subs := range [][]options.Subscription{
		options.SourceSubscriptions(source, nil), options.AgentSubscriptions(cluster, nil),
	} {
		tr, err := pubsub.New(s.Config(), pubsub.WithLogger(logr.Discard()))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := tr.Start(ctx, subs, transporttest.NewRecorder()); err != nil {
			t.Fatal(err)
		}
		if err := tr.Close(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
}

func ocmPubSubOptions(t *testing.T, path string) *ocmpubsub.PubSubOptions {
	o, err := ocmpubsub.BuildPubSubOptionsFromFlags(path)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func pubsubConfig(t *testing.T, path string) *pubsub.Config {
	c, err := pubsub.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	return &c
}

// An OCM hub drives a workwire agent over Pub/Sub, each on the config file
// an OCM deployment gives it, and a workwire hub drives an OCM agent.
func TestPubSubWithOCMPeers(t *testing.T) {
	t.Run("ocm-hub", func(t *testing.T) {
		t.Parallel()
		s := pubsubtest.NewServer(t)
		source, cluster := unique("hub"), unique("cluster")
		provisionPubSub(t, s, source, cluster)
		hubFile, agentFile := ocmPubSubFiles(t, s, source, cluster)
		h := startOCMHub(t, ocmPubSubOptions(t, hubFile), source)
		var agents []*wwAgent
		r := newRun(t, h, cluster, func(t *testing.T) agent {
			a := startWWAgent(t, work.NewClientHolderBuilder(pubsubConfig(t, agentFile)).WithClusterName(cluster).
				WithLogger(logr.Discard()).WithStatusResend(time.Second), cluster)
			agents = append(agents, a)
			return a
		})
		r.lifecycle(size(t, 300))
		checkOCMHubDrops(t, h)
		for i, a := range agents {
			if d := a.drops.dropped(); len(d) != 0 {
				t.Errorf("the workwire agent's run %d dropped events: %v", i+1, d)
			}
		}
	})
	t.Run("ocm-agent", func(t *testing.T) {
		t.Parallel()
		s := pubsubtest.NewServer(t)
		source, cluster := unique("hub"), unique("cluster")
		provisionPubSub(t, s, source, cluster)
		hubFile, agentFile := ocmPubSubFiles(t, s, source, cluster)
		hubDrops := &dropCounter{reasons: map[generic.DropReason]int{}}
		// OCM's agent answers a status resync from a List read before it
		// stamps each answer's sequence ID, so an answer can carry an older
		// status than an update it sent just before, under a newer ID, and
		// a workwire hub keeps it until its next periodic status resync
		// (docs/ocm.md). Over Pub/Sub the hub's request, kept in the agent's
		// subscription since it was provisioned, reaches the agent while the
		// first works arrive, so this run hits it (4 of 6 runs at the 5
		// minutes' default): the hub resyncs every 30 seconds here.
		h := startWWHub(t, func() *work.ClientHolderBuilder {
			return work.NewClientHolderBuilder(pubsubConfig(t, hubFile)).WithSourceID(source).WithLogger(logr.Discard()).
				WithSourceOptions(generic.WithObserver(hubDrops), generic.WithResyncInterval(30*time.Second))
		})
		r := newRun(t, h, cluster, func(t *testing.T) agent { return startOCMAgent(t, ocmPubSubOptions(t, agentFile), cluster) })
		r.lifecycle(size(t, 300))
		// The update such an answer overtook arrives after it under an
		// older ID, and is dropped as out of order: that is the race above,
		// healed by the resync (the lifecycle converged). Nothing else may
		// be dropped.
		d := hubDrops.dropped()
		t.Logf("the workwire hub dropped %d updates an OCM agent's resync answer overtook", d[generic.DropOutOfOrder])
		delete(d, generic.DropOutOfOrder)
		if len(d) != 0 {
			t.Errorf("the workwire hub dropped events: %v", d)
		}
		t.Logf("the workwire hub sent %d specs again", hubDrops.resends())
	})
}
