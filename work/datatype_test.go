package work_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/options/memory"
)

// An agent that decodes two data types answers each work as the data type
// it came as: a hub that speaks only the other one still gets every
// status, and the work's lifecycle ends on both sides.
func TestAnAgentAnswersAsTheDataTypeAWorkCameAs(t *testing.T) {
	broker := memory.NewBroker()
	hub := startHolder(t, hubBuilder(memoryTransport(broker), "hub1").WithCodecs(codec.NewManifestCodec()))
	agent := startHolder(t, agentBuilder(memoryTransport(broker), "cluster1").
		WithCodecs(codec.NewManifestBundleCodec(), codec.NewManifestCodec()))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	controller := runAgentController(ctx, t, agent, "cluster1")
	defer controller.Wait()
	defer cancel()

	works := hub.WorkInterface().WorkV1().ManifestWorks("cluster1")
	lister := hub.ManifestWorkInformer().Lister().ManifestWorks("cluster1")
	if _, err := works.Create(ctx, newWork("w1", "v1", map[string]string{"app": "demo"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the hub to see w1 applied", func() bool { return appliedAt(lister, "w1") })
	if err := works.Delete(ctx, "w1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	agentLister := agent.ManifestWorkInformer().Lister().ManifestWorks("cluster1")
	eventually(t, "both sides to let w1 go", func() bool {
		_, hubErr := lister.Get("w1")
		_, agentErr := agentLister.Get("w1")
		return hubErr != nil && agentErr != nil
	})
}
