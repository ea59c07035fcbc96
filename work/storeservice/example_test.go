package storeservice_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/options/grpc"
	"github.com/workwire/sdk-go/options/grpc/server"
	"github.com/workwire/sdk-go/work"
	"github.com/workwire/sdk-go/work/storeservice"
	"github.com/workwire/sdk-go/work/workstore"
)

// A service that keeps its works in a Store of its own (here in memory;
// work/pgstore's in production) serves them to agents through the gRPC
// broker: a work written to the Store reaches its cluster's agent, the
// agent's status lands in the Store, and a deleted work leaves the Store
// once the agent let it go. The service never publishes anything itself:
// Run watches the Store, and the broker sends each change.
func ExampleNew() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store := workstore.NewMemory()

	svc, err := storeservice.New(store, server.DefaultSourceID, storeservice.WithLogger(logr.Discard()))
	if err != nil {
		panic(err)
	}
	srv, err := server.New(server.Config{}, server.WithService(codec.ManifestBundlesDataType.String(), svc), server.WithLogger(logr.Discard()))
	if err != nil {
		panic(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	serveCtx, stop := context.WithCancel(ctx)
	var serving sync.WaitGroup
	defer serving.Wait()
	defer stop()
	watching := make(chan struct{})
	serving.Go(func() { _ = svc.Run(serveCtx, watching) })
	serving.Go(func() { _ = srv.Serve(serveCtx, lis) })
	<-watching

	agent, err := startWorkAgent(ctx, &grpc.Config{ServerAddress: lis.Addr().String()}, "cluster1")
	if err != nil {
		panic(err)
	}
	defer agent.Close(context.Background())

	if _, err := store.Create(ctx, configMapWork("cluster1", "web")); err != nil {
		panic(err)
	}
	waitFor(ctx, "an Applied status in the store", func() bool {
		w, err := store.Get(ctx, "cluster1", "web")
		return err == nil && meta.IsStatusConditionTrue(w.Status.Conditions, workv1.WorkApplied)
	})
	fmt.Println("cluster1/web is Applied")

	if _, err := store.Delete(ctx, "cluster1", "web"); err != nil {
		panic(err)
	}
	waitFor(ctx, "the work to leave the store", func() bool {
		_, err := store.Get(ctx, "cluster1", "web")
		return apierrors.IsNotFound(err)
	})
	fmt.Println("cluster1/web is deleted")
	// Output:
	// cluster1/web is Applied
	// cluster1/web is deleted
}

// startWorkAgent starts the work agent of cluster, connected to the broker
// with cfg: its controller reports each work Applied at its generation. A
// real agent applies the manifests to its cluster first. A deleted work it
// leaves alone: the holder reports it Deleted.
func startWorkAgent(ctx context.Context, cfg *grpc.Config, cluster string) (*work.ClientHolder, error) {
	agent, err := work.NewClientHolderBuilder(cfg).WithClusterName(cluster).WithLogger(logr.Discard()).NewClientHolder()
	if err != nil {
		return nil, err
	}
	works := agent.WorkInterface().WorkV1().ManifestWorks(cluster)
	reportApplied := func(obj any) {
		w := obj.(*workv1.ManifestWork)
		if w.DeletionTimestamp != nil {
			return
		}
		if c := meta.FindStatusCondition(w.Status.Conditions, workv1.WorkApplied); c != nil && c.ObservedGeneration == w.Generation {
			return
		}
		w = w.DeepCopy() // the informer's objects are shared: never write to them
		meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{
			Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: "Applied", ObservedGeneration: w.Generation,
		})
		// A conflict means a newer spec has arrived: its update comes next, and is reported then.
		_, _ = works.UpdateStatus(ctx, w, metav1.UpdateOptions{})
	}
	_, err = agent.ManifestWorkInformer().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    reportApplied,
		UpdateFunc: func(_, obj any) { reportApplied(obj) },
	})
	if err != nil {
		return nil, err
	}
	if err := agent.Start(ctx); err != nil {
		return nil, err
	}
	return agent, nil
}

// configMapWork is a work of cluster that puts one ConfigMap on it.
func configMapWork(cluster, name string) *workv1.ManifestWork {
	return &workv1.ManifestWork{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cluster},
		Spec: workv1.ManifestWorkSpec{Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{{
			RawExtension: runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `","namespace":"default"}}`)},
		}}}},
	}
}

// waitFor polls cond until it holds, and panics if ctx ends first.
func waitFor(ctx context.Context, what string, cond func() bool) {
	for !cond() {
		select {
		case <-ctx.Done():
			panic(fmt.Sprintf("waiting for %s: %v", what, ctx.Err()))
		case <-time.After(10 * time.Millisecond):
		}
	}
}
