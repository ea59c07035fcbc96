package work_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/workwire/sdk-go/options/memory"
)

// mutateEnv makes TestAMutatedListerObjectIsDetected, run again as a child
// process, do the mutation itself.
const mutateEnv = "WORKWIRE_TEST_MUTATE_LISTER_OBJECT"

// A holder's informer caches the objects its store holds, so a controller
// that changes a lister's object in place changes what the holder
// publishes. client-go forbids it for every informer, and its cache
// mutation detector, read from KUBE_CACHE_MUTATION_DETECTOR at process
// start, catches it here too: the child process that mutates must die of
// it.
func TestAMutatedListerObjectIsDetected(t *testing.T) {
	if os.Getenv(mutateEnv) != "" {
		mutateAListerObject(t)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestAMutatedListerObjectIsDetected$", "-test.count=1")
	cmd.Env = append(os.Environ(), mutateEnv+"=1", "KUBE_CACHE_MUTATION_DETECTOR=true")
	out, err := cmd.CombinedOutput()
	if err == nil || ctx.Err() != nil {
		t.Fatalf("the child process that mutates a lister's object ended with %v, want it to panic:\n%s", err, out)
	}
	if !strings.Contains(string(out), "cache *v1.ManifestWork modified") {
		t.Fatalf("the child process failed, but not of the mutation detector:\n%s", out)
	}
}

func mutateAListerObject(t *testing.T) {
	hub := startHolder(t, hubBuilder(memoryTransport(memory.NewBroker()), "hub1"))
	works := hub.WorkInterface().WorkV1().ManifestWorks("cluster1")
	if _, err := works.Create(context.Background(), newWork("w1", "v1", map[string]string{"app": "demo"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	lister := hub.ManifestWorkInformer().Lister().ManifestWorks("cluster1")
	eventually(t, "the informer to cache the work", func() bool { _, err := lister.Get("w1"); return err == nil })
	w, _ := lister.Get("w1")
	w.Labels["app"] = "changed in place" // what a controller must not do
	// The detector compares every second and panics; this outlives it.
	time.Sleep(3 * time.Minute)
	t.Fatal("the mutation was not detected")
}
