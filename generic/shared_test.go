package generic_test

import (
	"fmt"
	"testing"

	"github.com/go-logr/logr"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/options/mqtt/mqtttest"
)

// Replicas of one source behind an MQTT shared subscription: an agent's
// spec resync of several batches must still be answered in full, though the
// broker hands each status to one replica only.
func TestSharedSourceReplicasAnswerABatchedResync(t *testing.T) {
	t.Parallel()
	b := mqtttest.NewBroker(t)
	transport := func(group string) options.Transport {
		tr, err := mqtt.New(mqtt.Config{BrokerHost: b.Addr(), SharedGroup: group}, mqtt.WithLogger(logr.Discard()))
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	const n, missing = 2500, 10 // 2,490 held: three batches
	hubStore, agentStore := newStore(), newStore()
	for i := range n {
		w := newWidget("hub", "c1", fmt.Sprint("w", i), "s", 1)
		hubStore.put(w)
		if i < n-missing {
			agentStore.put(w)
		}
	}
	// Both replicas share one store, as replicas over one database do.
	startSource(t, "hub", transport("hubs"), hubStore)
	startSource(t, "hub", transport("hubs"), hubStore)
	startAgent(t, transport(""), "c1", agentStore)
	eventually(t, "the agent holds every work", sameSpecs(hubStore, agentStore, "c1"))
}
