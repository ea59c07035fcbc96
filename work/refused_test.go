package work_test

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubetypes "k8s.io/apimachinery/pkg/types"

	"github.com/workwire/sdk-go/options/memory"
)

// What each side does not do is refused as a kube-apiserver refuses a
// method (405 MethodNotAllowed), in a sentence that says why.
func TestRefusedMethodsSayWhy(t *testing.T) {
	b := memory.NewBroker()
	hub := startHolder(t, hubBuilder(memoryTransport(b), "hub1")).WorkInterface().WorkV1().ManifestWorks("cluster1")
	agent := startHolder(t, agentBuilder(memoryTransport(b), "cluster1")).WorkInterface().WorkV1().ManifestWorks("cluster1")
	ctx := context.Background()
	w := newWork("w1", "a", nil)
	for _, c := range []struct {
		call func() error
		want string
	}{
		{func() error { _, err := agent.Create(ctx, w, metav1.CreateOptions{}); return err },
			"an agent cannot create manifestworks.work.open-cluster-management.io: they come from sources"},
		{func() error { return agent.Delete(ctx, "w1", metav1.DeleteOptions{}) },
			"an agent cannot delete manifestworks.work.open-cluster-management.io: their sources do"},
		{func() error { return agent.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}) },
			"an agent cannot delete a collection of manifestworks.work.open-cluster-management.io: their sources delete them"},
		{func() error { _, err := hub.UpdateStatus(ctx, w, metav1.UpdateOptions{}); return err },
			"a source cannot update the status of manifestworks.work.open-cluster-management.io: their agents report it"},
		{func() error {
			_, err := hub.Patch(ctx, "w1", kubetypes.MergePatchType, []byte(`{}`), metav1.PatchOptions{}, "status")
			return err
		}, "a source cannot patch the status of manifestworks.work.open-cluster-management.io: their agents report it"},
	} {
		err := c.call()
		if !apierrors.IsMethodNotSupported(err) || err.Error() != c.want {
			t.Errorf("%v\nwant MethodNotAllowed: %s", err, c.want)
		}
	}
}
