package workstore_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/work/workstore"
)

// The contract every Store keeps, on the in-memory one: writes behave as a
// kube-apiserver's, a status is stored only over an older one, so a
// redelivered or reordered status changes nothing, and a deleted work stays
// until its agent reports it Deleted. Watch tells every change in order: it
// is what sends works to agents (storeservice.Service.Run).
func ExampleNewMemory() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store := workstore.NewMemory()

	watchCtx, stopWatch := context.WithCancel(ctx)
	changes := make(chan workstore.Change, 16)
	ready := make(chan struct{})
	watched := make(chan error, 1)
	go func() { watched <- store.Watch(watchCtx, func(c workstore.Change) { changes <- c }, ready) }()
	<-ready

	created, err := store.Create(ctx, configMapWork("cluster1", "web", "v1"))
	if err != nil {
		panic(err)
	}
	fmt.Println("created", created.Namespace+"/"+created.Name, "at generation", created.Generation)

	edit := configMapWork("cluster1", "web", "v2")
	edit.ResourceVersion = created.ResourceVersion // the version this edit was read at
	updated, err := store.Update(ctx, edit)
	if err != nil {
		panic(err)
	}
	fmt.Println("spec changed: generation", updated.Generation)
	_, err = store.Update(ctx, edit)
	fmt.Println("the same edit again conflicts:", apierrors.IsConflict(err))

	uid := string(updated.UID)
	applied := workv1.ManifestWorkStatus{Conditions: []metav1.Condition{{
		Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: "Applied", ObservedGeneration: 2,
	}}}
	stored, err := store.ApplyStatus(ctx, uid, generic.StatusOrder{Version: 2, Sequence: 7, HasSequence: true}, applied)
	if err != nil {
		panic(err)
	}
	fmt.Println("status of generation 2 stored:", stored)
	stored, err = store.ApplyStatus(ctx, uid, generic.StatusOrder{Version: 1, Sequence: 8, HasSequence: true}, workv1.ManifestWorkStatus{})
	if err != nil {
		panic(err)
	}
	fmt.Println("a late status of generation 1 stored:", stored)

	if _, err := store.Delete(ctx, "cluster1", "web"); err != nil {
		panic(err)
	}
	deleting, err := store.Get(ctx, "cluster1", "web")
	if err != nil {
		panic(err)
	}
	fmt.Println("deleted, still there:", deleting.DeletionTimestamp != nil)
	deleted := workv1.ManifestWorkStatus{Conditions: []metav1.Condition{{
		Type: codec.WorkDeleted, Status: metav1.ConditionTrue, Reason: "Deleted", ObservedGeneration: 2,
	}}}
	if _, err := store.ApplyStatus(ctx, uid, generic.StatusOrder{Version: 2, Sequence: 9, HasSequence: true}, deleted); err != nil {
		panic(err)
	}
	_, err = store.Get(ctx, "cluster1", "web")
	fmt.Println("gone once its agent reported Deleted:", apierrors.IsNotFound(err))

	var ops []string
	for len(ops) < 5 {
		select {
		case c := <-changes:
			ops = append(ops, c.Op.String())
		case <-ctx.Done():
			panic(ctx.Err())
		}
	}
	stopWatch()
	if err := <-watched; err != nil {
		panic(err)
	}
	fmt.Println("watch:", strings.Join(ops, ", "))
	// Output:
	// created cluster1/web at generation 1
	// spec changed: generation 2
	// the same edit again conflicts: true
	// status of generation 2 stored: true
	// a late status of generation 1 stored: false
	// deleted, still there: true
	// gone once its agent reported Deleted: true
	// watch: created, spec changed, status changed, spec changed, deleted
}

// configMapWork is a work of cluster that puts one ConfigMap, whose data
// is data, on the cluster.
func configMapWork(cluster, name, data string) *workv1.ManifestWork {
	manifest := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `","namespace":"default"},"data":{"version":"` + data + `"}}`
	return &workv1.ManifestWork{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cluster},
		Spec: workv1.ManifestWorkSpec{Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{
			{RawExtension: runtime.RawExtension{Raw: []byte(manifest)}},
		}}},
	}
}
