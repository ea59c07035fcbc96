package pgstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/work/pgstore"
	"github.com/workwire/sdk-go/work/workstore"
)

// A service keeps its works in PostgreSQL: Open migrates the schema, and
// the Store then behaves as every workstore.Store does (see
// workstore.NewMemory's example). Every replica of the service opens the
// same database. It needs a PostgreSQL server, so go test compiles this
// example but does not run it; work/storeservice serves such a Store to
// agents through the gRPC broker.
func ExampleOpen() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, "postgres://workwire@db.example.com:5432/works")
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	store, err := pgstore.Open(ctx, pool)
	if err != nil {
		panic(err)
	}

	web := &workv1.ManifestWork{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "cluster1"}, // the namespace is the cluster
		Spec: workv1.ManifestWorkSpec{Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{{
			RawExtension: runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web","namespace":"default"}}`)},
		}}}},
	}
	if _, err := store.Create(ctx, web); err != nil {
		panic(err)
	}
	works, err := store.List(ctx, workstore.ListOptions{Cluster: "cluster1"})
	if err != nil {
		panic(err)
	}
	for _, w := range works.Items {
		fmt.Println(w.Namespace+"/"+w.Name, "generation", w.Generation)
	}
}
