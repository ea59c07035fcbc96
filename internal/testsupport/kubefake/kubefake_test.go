package kubefake_test

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"

	"github.com/workwire/sdk-go/internal/testsupport/kubefake"
)

// The stand-in writes as a kube-apiserver does where Services rely on it.
func TestTheStandInWritesAsAKubeAPIServer(t *testing.T) {
	ctx := context.Background()
	clusters := kubefake.NewHub().Cluster.ClusterV1().ManagedClusters()
	created, err := clusters.Create(ctx, &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{GenerateName: "cluster-", Finalizers: []string{"hold"}},
		Status: clusterv1.ManagedClusterStatus{Version: clusterv1.ManagedClusterVersion{Kubernetes: "set by the client"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.Name == "cluster-" || created.UID == "" || created.ResourceVersion == "" || created.Generation != 1 || created.CreationTimestamp.IsZero() {
		t.Fatalf("created: %+v", created.ObjectMeta)
	}

	status := created.DeepCopy()
	status.Status.Version.Kubernetes = "v1.37.2"
	status.Spec.HubAcceptsClient = true // not written by a status update
	afterStatus, err := clusters.UpdateStatus(ctx, status, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if afterStatus.Spec.HubAcceptsClient || afterStatus.Status.Version.Kubernetes != "v1.37.2" || afterStatus.Generation != 1 {
		t.Errorf("after a status update: spec %+v, status %+v, generation %d", afterStatus.Spec, afterStatus.Status.Version, afterStatus.Generation)
	}
	if _, err := clusters.Update(ctx, created, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("an update from a stale resourceVersion: %v, want Conflict", err)
	}

	spec := afterStatus.DeepCopy()
	spec.Spec.HubAcceptsClient = true
	spec.Status.Version.Kubernetes = "not written by a spec update"
	afterSpec, err := clusters.Update(ctx, spec, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !afterSpec.Spec.HubAcceptsClient || afterSpec.Status.Version.Kubernetes != "v1.37.2" || afterSpec.Generation != 2 {
		t.Errorf("after a spec update: spec %+v, status %+v, generation %d", afterSpec.Spec, afterSpec.Status.Version, afterSpec.Generation)
	}

	if err := clusters.Delete(ctx, created.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	marked, err := clusters.Get(ctx, created.Name, metav1.GetOptions{})
	if err != nil || marked.DeletionTimestamp == nil {
		t.Fatalf("a deleted object with a finalizer: %v, %v, want it marked", marked, err)
	}
	marked.Finalizers = nil
	if _, err := clusters.Update(ctx, marked, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := clusters.Get(ctx, created.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after its last finalizer: %v, want NotFound", err)
	}
}
