package kubeservice_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clusterv1 "open-cluster-management.io/api/cluster/v1"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/options/grpc"
	"github.com/workwire/sdk-go/options/grpc/grpctest"
	"github.com/workwire/sdk-go/options/grpc/server"
	"github.com/workwire/sdk-go/registration/kubeservice"
	"github.com/workwire/sdk-go/resource"
)

// A workwire agent joins with mirror holders (resource.HolderBuilder.Mirror)
// over the broker and the registration Services: it creates its cluster,
// sees the hub's object in its informer, reports its status, and renews the
// hub's lease; the hub's refusals (AlreadyExists) reach it as such.
func TestAMirrorAgentJoinsAndRenewsItsLease(t *testing.T) {
	h := startHub(t)
	srv := grpctest.NewServer(t,
		server.WithService(kubeservice.ManagedClusterCodec.DataType().String(), h.clusterSvc),
		server.WithService(kubeservice.LeaseCodec.DataType().String(), h.leaseSvc))
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := clusterv1.Install(scheme); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cfg := &grpc.Config{ServerAddress: srv.Addr()}
	clusters := startMirror(t, resource.NewHolderBuilder[*clusterv1.ManagedCluster, *clusterv1.ManagedClusterList](cfg, scheme).
		WithCodecs(kubeservice.ManagedClusterCodec))
	leases := startMirror(t, resource.NewHolderBuilder[*coordinationv1.Lease, *coordinationv1.LeaseList](cfg, scheme).
		WithCodecs(kubeservice.LeaseCodec))

	join := &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: "cluster1"}, Spec: clusterv1.ManagedClusterSpec{LeaseDurationSeconds: 60}}
	if _, err := clusters.Resources("").Create(ctx, join, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create: %v", err)
	}
	var mine *clusterv1.ManagedCluster
	eventually(t, "the hub's cluster in the agent's informer", func() bool {
		var err error
		mine, err = clusters.Lister("").Get("cluster1")
		return err == nil
	})
	if mine.UID == "" || mine.CreationTimestamp.IsZero() {
		t.Errorf("the informer's cluster is not the hub's: %+v", mine.ObjectMeta)
	}
	if _, err := clusters.Resources("").Create(ctx, join, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Errorf("a second create: %v, want the hub's AlreadyExists", err)
	}
	reported := mine.DeepCopy()
	meta.SetStatusCondition(&reported.Status.Conditions, metav1.Condition{Type: clusterv1.ManagedClusterConditionJoined, Status: metav1.ConditionTrue, Reason: "Joined"})
	if _, err := clusters.Resources("").UpdateStatus(ctx, reported, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update status: %v", err)
	}
	eventually(t, "the status on the hub", func() bool {
		c, err := h.clusters.ClusterV1().ManagedClusters().Get(ctx, "cluster1", metav1.GetOptions{})
		return err == nil && meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1.ManagedClusterConditionJoined)
	})

	if _, err := h.kube.CoordinationV1().Leases("cluster1").Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "managed-cluster-lease", Namespace: "cluster1"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		var lease *coordinationv1.Lease
		eventually(t, "the hub's lease at its latest in the agent's informer", func() bool {
			l, err := leases.Lister("cluster1").Get("managed-cluster-lease")
			if err != nil {
				return false
			}
			hub, err := h.kube.CoordinationV1().Leases("cluster1").Get(ctx, "managed-cluster-lease", metav1.GetOptions{})
			lease = l
			return err == nil && equalRenewTime(l.Spec.RenewTime, hub.Spec.RenewTime)
		})
		renewed := lease.DeepCopy()
		now := metav1.NewMicroTime(time.Now().Add(time.Duration(round) * time.Second))
		renewed.Spec.RenewTime = &now
		if _, err := leases.Resources("cluster1").Update(ctx, renewed, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("renewal %d: %v", round, err)
		}
	}
	hub, err := h.kube.CoordinationV1().Leases("cluster1").Get(ctx, "managed-cluster-lease", metav1.GetOptions{})
	if err != nil || hub.Spec.RenewTime == nil {
		t.Fatalf("the hub's lease after three renewals: %+v, %v", hub, err)
	}

	// The hub deletes it: it leaves the agent's informer.
	if err := h.kube.CoordinationV1().Leases("cluster1").Delete(ctx, "managed-cluster-lease", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the lease gone from the agent's informer", func() bool {
		_, err := leases.Lister("cluster1").Get("managed-cluster-lease")
		return apierrors.IsNotFound(err)
	})
}

func equalRenewTime(a, b *metav1.MicroTime) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(b)
}

// startMirror starts an agent mirror holder of cluster1, closed when t ends.
func startMirror[T resource.Object, L runtime.Object](t *testing.T, b *resource.HolderBuilder[T, L]) *resource.Holder[T, L] {
	t.Helper()
	h, err := b.WithClusterName("cluster1").Mirror().WithLogger(logr.Discard()).
		WithAgentOptions(generic.WithResyncInterval(0)).NewHolder()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := h.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return h
}
