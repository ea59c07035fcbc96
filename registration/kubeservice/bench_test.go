package kubeservice_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	grpclib "google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/internal/testsupport/kubetest"
	"github.com/workwire/sdk-go/options/grpc/grpctest"
	"github.com/workwire/sdk-go/options/grpc/protocol"
	"github.com/workwire/sdk-go/options/grpc/server"
	"github.com/workwire/sdk-go/registration/kubeservice"
)

// BenchmarkLeaseRenewals measures how many lease renewals one server
// replica carries into a real kube-apiserver: 1,000 clusters, each renewing
// its lease as OCM's agents do (a spec update_request with the version it
// read), 16 at a time over gRPC. Each renewal also reads the lease back
// from the kube-apiserver for the next one's version (an agent has it from
// the hub's update event), so the figure is a floor. 1,000 clusters renewing every 10 s need
// 100/s. Run it with WORKWIRE_KUBE_APISERVER and WORKWIRE_ETCD set.
func BenchmarkLeaseRenewals(b *testing.B) {
	const clusters, senders = 1000, 16
	cfg := kubetest.Start(b)
	kube := kubernetes.NewForConfigOrDie(cfg)
	names := make([]string, clusters)
	for i := range names {
		names[i] = fmt.Sprintf("cluster%d", i)
	}
	kubetest.CreateNamespaces(b, cfg, names...)
	ctx := context.Background()
	leases := make([]*coordinationv1.Lease, clusters)
	for i, ns := range names {
		l, err := kube.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "managed-cluster-lease", Namespace: ns}}, metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		leases[i] = l
	}
	inf := informers.NewSharedInformerFactory(kube, 0)
	svc, err := kubeservice.NewLeases(kube, inf.Coordination().V1().Leases(), server.DefaultSourceID)
	if err != nil {
		b.Fatal(err)
	}
	infCtx, stop := context.WithCancel(ctx)
	inf.Start(infCtx.Done())
	b.Cleanup(func() { stop(); inf.Shutdown() })
	inf.WaitForCacheSync(infCtx.Done())
	srv := grpctest.NewServer(b, server.WithService(kubeservice.LeaseCodec.DataType().String(), svc))
	conn, err := grpclib.NewClient(srv.Addr(), grpclib.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	client := protocol.NewCloudEventServiceClient(conn)

	// Each cluster's renewals are in order (an agent renews after the last
	// answered), so a sender owns its clusters.
	var next atomic.Int64
	var failed atomic.Int64
	renew := func(l *coordinationv1.Lease) *coordinationv1.Lease {
		now := metav1.NewMicroTime(time.Now())
		l.Spec.RenewTime = &now
		evt, err := kubeservice.LeaseCodec.Encode(l.Namespace+"-agent", types.EventType{DataType: kubeservice.LeaseCodec.DataType(), SubResource: types.SubResourceSpec, Action: types.UpdateRequest}, l)
		if err != nil {
			b.Error(err)
			return l
		}
		pbe, err := protocol.ToProto(evt)
		if err != nil {
			b.Error(err)
			return l
		}
		if _, err := client.Publish(ctx, &protocol.PublishRequest{Event: pbe}); err != nil {
			failed.Add(1)
			fresh, gerr := kube.CoordinationV1().Leases(l.Namespace).Get(ctx, l.Name, metav1.GetOptions{})
			if gerr == nil {
				return fresh
			}
			return l
		}
		fresh, err := kube.CoordinationV1().Leases(l.Namespace).Get(ctx, l.Name, metav1.GetOptions{})
		if err != nil {
			b.Error(err)
			return l
		}
		return fresh
	}
	b.ResetTimer()
	begin := time.Now()
	var wg sync.WaitGroup
	for s := range senders {
		var owned []int // a sender owns the clusters i with i % senders == s
		for i := s; i < clusters; i += senders {
			owned = append(owned, i)
		}
		wg.Go(func() {
			for k := 0; next.Add(1) <= int64(b.N); k++ {
				i := owned[k%len(owned)]
				leases[i] = renew(leases[i])
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(begin).Seconds(), "renewals/s")
	if failed.Load() > 0 {
		b.Logf("%d renewals failed (a Conflict retried from a fresh read)", failed.Load())
	}
}
