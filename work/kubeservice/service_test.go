package kubeservice_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubetypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/watch"
	clienttesting "k8s.io/client-go/testing"
	"open-cluster-management.io/api/client/work/clientset/versioned"
	"open-cluster-management.io/api/client/work/clientset/versioned/fake"
	workinformers "open-cluster-management.io/api/client/work/informers/externalversions"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/internal/testsupport/kubetest"
	"github.com/workwire/sdk-go/options/grpc"
	"github.com/workwire/sdk-go/options/grpc/grpctest"
	"github.com/workwire/sdk-go/options/grpc/server"
	"github.com/workwire/sdk-go/work"
	"github.com/workwire/sdk-go/work/kubeservice"
)

// sarama (reached through work) starts go-metrics' process-wide meter.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"))
}

var worksResource = schema.GroupVersionResource{Group: workv1.GroupName, Version: "v1", Resource: "manifestworks"}

// testHub is the work API a Service runs over in a test.
type testHub struct {
	versioned.Interface
	fake *fake.Clientset // nil over a real kube-apiserver
}

// forEachHub runs test over each hub: client-go's fake clientset, taught
// what the Service relies on, and a real kube-apiserver with OCM's
// ManifestWork CRD (skipped where kubetest finds none).
func forEachHub(t *testing.T, test func(t *testing.T, hub *testHub)) {
	t.Run("fake", func(t *testing.T) {
		f := newFakeHub()
		test(t, &testHub{Interface: f, fake: f})
	})
	t.Run("kube-apiserver", func(t *testing.T) {
		cfg := kubetest.Start(t)
		kubetest.InstallCRDs(t, cfg, kubetest.ModuleFile(t, "open-cluster-management.io/api", "work/v1/0000_00_work.open-cluster-management.io_manifestworks.crd.yaml"))
		kubetest.CreateNamespaces(t, cfg, "cluster1", "cluster2")
		client, err := versioned.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		test(t, &testHub{Interface: client})
	})
}

// newFakeHub returns a fake work clientset that writes as a kube-apiserver
// does where the Service relies on it: a create gets a UID and generation
// 1, a spec change raises the generation, a status write changes only the
// status, and a delete of a work with finalizers only marks it, which
// leaves once its last finalizer is removed.
func newFakeHub() *fake.Clientset {
	//lint:ignore SA1019 OCM's work clientset has no NewClientset (it is generated without apply configurations)
	hub := fake.NewSimpleClientset()
	tracker := hub.Tracker()
	hub.PrependReactor("create", "manifestworks", func(a clienttesting.Action) (bool, runtime.Object, error) {
		w := a.(clienttesting.CreateAction).GetObject().(*workv1.ManifestWork).DeepCopy()
		w.UID, w.Generation, w.CreationTimestamp = uuid.NewUUID(), 1, metav1.Now()
		if err := tracker.Create(worksResource, w, w.Namespace); err != nil {
			return true, nil, err
		}
		return true, w, nil
	})
	hub.PrependReactor("update", "manifestworks", func(a clienttesting.Action) (bool, runtime.Object, error) {
		u := a.(clienttesting.UpdateAction)
		next := u.GetObject().(*workv1.ManifestWork).DeepCopy()
		obj, err := tracker.Get(worksResource, next.Namespace, next.Name)
		if err != nil {
			return true, nil, err
		}
		cur := obj.(*workv1.ManifestWork)
		if next.ResourceVersion != cur.ResourceVersion {
			return true, nil, apierrors.NewConflict(workv1.Resource("manifestworks"), next.Name, errors.New("stale resourceVersion"))
		}
		if u.GetSubresource() == "status" {
			st := next.Status
			next = cur.DeepCopy()
			next.Status = st
		} else {
			next.Status, next.DeletionTimestamp, next.Generation = cur.Status, cur.DeletionTimestamp, cur.Generation
			if !equality.Semantic.DeepEqual(next.Spec, cur.Spec) {
				next.Generation++
			}
		}
		if next.DeletionTimestamp != nil && len(next.Finalizers) == 0 {
			return true, next, tracker.Delete(worksResource, next.Namespace, next.Name)
		}
		next.ResourceVersion = fmt.Sprint(time.Now().UnixNano())
		return true, next, tracker.Update(worksResource, next, next.Namespace)
	})
	hub.PrependReactor("delete", "manifestworks", func(a clienttesting.Action) (bool, runtime.Object, error) {
		d := a.(clienttesting.DeleteAction)
		obj, err := tracker.Get(worksResource, d.GetNamespace(), d.GetName())
		if err != nil {
			return true, nil, err
		}
		w := obj.(*workv1.ManifestWork).DeepCopy()
		if len(w.Finalizers) == 0 {
			return true, nil, tracker.Delete(worksResource, w.Namespace, w.Name)
		}
		now := metav1.Now()
		w.DeletionTimestamp = &now
		w.ResourceVersion = fmt.Sprint(time.Now().UnixNano())
		return true, w, tracker.Update(worksResource, w, w.Namespace)
	})
	return hub
}

// startService starts a Service over hub and its informer, stops both when
// the test ends, and returns once the informer watches: a work created
// between the informer's list and its watch must not depend on how the
// fake clientset resumes a watch.
func startService(t *testing.T, hub *testHub, opts ...kubeservice.Option) *kubeservice.Service {
	t.Helper()
	watching := make(chan struct{})
	if hub.fake == nil {
		close(watching) // a kube-apiserver resumes a watch where its list ended
	} else {
		var once sync.Once
		hub.fake.PrependWatchReactor("manifestworks", func(a clienttesting.Action) (bool, watch.Interface, error) {
			opts := a.(clienttesting.WatchActionImpl).ListOptions
			if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
				// The tracker sends no bookmark at the end of the initial
				// events: the informer falls back to list and watch.
				return true, nil, apierrors.NewBadRequest("the fake clientset does not serve watch-list")
			}
			w, err := hub.fake.Tracker().Watch(a.GetResource(), a.GetNamespace(), opts)
			once.Do(func() { close(watching) })
			return true, w, err
		})
	}
	factory := workinformers.NewSharedInformerFactory(hub, 0)
	svc, err := kubeservice.New(hub, factory.Work().V1().ManifestWorks(), server.DefaultSourceID,
		append([]kubeservice.Option{kubeservice.WithLogger(logr.Discard())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { defer close(done); svc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		factory.Shutdown()
	})
	select {
	case <-watching:
	case <-time.After(20 * time.Second):
		t.Fatal("the Service's informer never watched")
	}
	for _, synced := range factory.WaitForCacheSync(ctx.Done()) {
		if !synced {
			t.Fatal("the Service's informer never synced")
		}
	}
	return svc
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func newWork(name, value string) *workv1.ManifestWork {
	return &workv1.ManifestWork{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "cluster1", Labels: map[string]string{"app": name}},
		Spec: workv1.ManifestWorkSpec{Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{{RawExtension: runtime.RawExtension{Raw: []byte(
			fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":"default"},"data":{"value":%q}}`, name, value))}}}}},
	}
}

func hubWork(t *testing.T, hub *testHub, name string) (*workv1.ManifestWork, bool) {
	w, err := hub.WorkV1().ManifestWorks("cluster1").Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return w, true
}

func appliedAt(w *workv1.ManifestWork, generation int64) bool {
	c := meta.FindStatusCondition(w.Status.Conditions, workv1.WorkApplied)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == generation
}

// The whole lifecycle of a work kept in a kube-apiserver, through the gRPC
// server and a work agent: the agent gets the work, its status lands in
// the kube-apiserver, a spec change reaches the agent, and a deletion
// waits for the agent's cleanup before the work leaves.
func TestLifecycleThroughTheGRPCServer(t *testing.T) {
	forEachHub(t, testLifecycleThroughTheGRPCServer)
}

func testLifecycleThroughTheGRPCServer(t *testing.T, hub *testHub) {
	svc := startService(t, hub)
	srv := grpctest.NewServer(t, server.WithService(codec.ManifestBundlesDataType.String(), svc))
	ctx := context.Background()

	agent, err := work.NewClientHolderBuilder(&grpc.Config{ServerAddress: srv.Addr()}).WithClusterName("cluster1").
		WithAgentOptions(generic.WithResyncInterval(0)).WithLogger(logr.Discard()).NewClientHolder()
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := agent.Close(cctx); err != nil {
			t.Errorf("close the agent: %v", err)
		}
	})
	agentWorks := agent.WorkInterface().WorkV1().ManifestWorks("cluster1")
	apply := func(name string, generation int64) {
		t.Helper()
		eventually(t, fmt.Sprintf("%s at generation %d at the agent", name, generation), func() bool {
			w, err := agentWorks.Get(ctx, name, metav1.GetOptions{})
			if err != nil || w.Generation != generation {
				return false
			}
			meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{
				Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: "Applied", ObservedGeneration: generation,
			})
			_, err = agentWorks.UpdateStatus(ctx, w, metav1.UpdateOptions{})
			return err == nil
		})
	}

	created, err := hub.WorkV1().ManifestWorks("cluster1").Create(ctx, newWork("web", "1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the finalizer on the work", func() bool {
		w, ok := hubWork(t, hub, "web")
		return ok && len(w.Finalizers) == 1 && w.Finalizers[0] == kubeservice.Finalizer
	})
	apply("web", 1)
	eventually(t, "the agent's status in the kube-apiserver", func() bool {
		w, ok := hubWork(t, hub, "web")
		return ok && appliedAt(w, 1)
	})

	// A spec change: a new generation at the agent, and its status back.
	cur, _ := hubWork(t, hub, "web")
	cur.Spec = newWork("web", "2").Spec
	if _, err := hub.WorkV1().ManifestWorks("cluster1").Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	apply("web", 2)
	eventually(t, "the status of generation 2", func() bool {
		w, ok := hubWork(t, hub, "web")
		return ok && appliedAt(w, 2)
	})

	// Deletion: marked, sent, cleaned up by the agent (no finalizer of its
	// own here, so its holder reports Deleted at once), then gone. Run puts
	// its finalizer on the work in the background: wait for it, or a
	// delete before it leaves at once.
	eventually(t, "the service's finalizer on the work", func() bool {
		w, ok := hubWork(t, hub, "web")
		return ok && slices.Contains(w.Finalizers, kubeservice.Finalizer)
	})
	if err := hub.WorkV1().ManifestWorks("cluster1").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if w, ok := hubWork(t, hub, "web"); !ok || w.DeletionTimestamp == nil {
		t.Fatal("the work left before its agent cleaned up")
	}
	eventually(t, "the work gone from the kube-apiserver", func() bool { _, ok := hubWork(t, hub, "web"); return !ok })
	eventually(t, "the work gone from the agent", func() bool {
		_, err := agentWorks.Get(ctx, "web", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if created.UID == "" {
		t.Error("the hub gave the work no UID")
	}
}

// Get, List and StatusHashes answer from the informer, by UID and by
// cluster; a status older than one written is dropped.
func TestServiceAnswersFromTheInformer(t *testing.T) {
	forEachHub(t, testServiceAnswersFromTheInformer)
}

func testServiceAnswersFromTheInformer(t *testing.T, hub *testHub) {
	svc := startService(t, hub)
	ctx := context.Background()
	var uids []kubetypes.UID
	for i := range 3 {
		w, err := hub.WorkV1().ManifestWorks("cluster1").Create(ctx, newWork(fmt.Sprint("w", i), "1"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uids = append(uids, w.UID)
	}
	other := newWork("elsewhere", "1")
	other.Namespace = "cluster2"
	if _, err := hub.WorkV1().ManifestWorks("cluster2").Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the informer holds every work", func() bool {
		all, err := svc.List(ctx, server.ListOptions{})
		return err == nil && len(all) == 4
	})

	evt, err := svc.Get(ctx, string(uids[1]))
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := types.RequiredString(evt, types.ExtResourceID); id != string(uids[1]) {
		t.Errorf("Get(%s) returned resource %s", uids[1], id)
	}
	if c, _ := types.RequiredString(evt, types.ExtClusterName); c != "cluster1" || evt.Source() != server.DefaultSourceID {
		t.Errorf("Get: cluster %q, source %q", c, evt.Source())
	}
	if et, _ := types.ParseEventType(evt.Type()); et.Action != types.CreateRequest || et.DataType != codec.ManifestBundlesDataType {
		t.Errorf("Get: type %s, want a manifestbundles create_request", evt.Type())
	}
	if _, err := svc.Get(ctx, "no-such-uid"); !errors.Is(err, server.ErrNotFound) {
		t.Errorf("Get of an unknown UID: %v, want ErrNotFound", err)
	}
	if one, err := svc.List(ctx, server.ListOptions{ClusterName: "cluster2"}); err != nil || len(one) != 1 {
		t.Errorf("List of cluster2: %d events, %v; want 1", len(one), err)
	}
	if hashes, err := svc.StatusHashes(ctx, "cluster1"); err != nil || hashes != nil {
		t.Errorf("StatusHashes with no status = %v, %v; want none (ask for every status)", hashes, err)
	}

	// Statuses of w0: generation 1 sequence 10, then an older one.
	sendStatus := func(seq, reason string) error {
		w, _ := hubWork(t, hub, "w0")
		w.Annotations = map[string]string{codec.OriginalSourceAnnotation: server.DefaultSourceID} // as an agent holds it
		w.Status.Conditions = []metav1.Condition{{Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: reason, ObservedGeneration: 1, LastTransitionTime: metav1.Now()}}
		evt, err := codec.NewManifestBundleCodec().Encode("cluster1-agent",
			types.EventType{DataType: codec.ManifestBundlesDataType, SubResource: types.SubResourceStatus, Action: types.UpdateRequest}, w)
		if err != nil {
			t.Fatal(err)
		}
		evt.SetExtension(types.ExtSequenceID, seq)
		evt.SetExtension(types.ExtOriginalSource, server.DefaultSourceID)
		return svc.HandleStatusUpdate(ctx, evt)
	}
	if err := sendStatus("10", "Newer"); err != nil {
		t.Fatal(err)
	}
	if err := sendStatus("9", "Older"); err != nil {
		t.Fatal(err)
	}
	if w, _ := hubWork(t, hub, "w0"); len(w.Status.Conditions) != 1 || w.Status.Conditions[0].Reason != "Newer" {
		t.Errorf("status %v: the older status overwrote the newer", w.Status.Conditions)
	}
	eventually(t, "a status hash for w0", func() bool {
		hashes, err := svc.StatusHashes(ctx, "cluster1")
		return err == nil && len(hashes) == 3
	})

	// An agent writes only statuses: a spec from one, which would carry an
	// empty status, is refused and changes nothing.
	w, _ := hubWork(t, hub, "w0")
	w.Annotations = map[string]string{codec.OriginalSourceAnnotation: server.DefaultSourceID}
	w.Status = workv1.ManifestWorkStatus{}
	spec, err := codec.NewManifestBundleCodec().Encode("cluster1-agent",
		types.EventType{DataType: codec.ManifestBundlesDataType, SubResource: types.SubResourceSpec, Action: types.UpdateRequest}, w)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.HandleStatusUpdate(ctx, spec); status.Code(err) != codes.InvalidArgument {
		t.Errorf("a spec from an agent: %v, want InvalidArgument", err)
	}
	if w, _ := hubWork(t, hub, "w0"); len(w.Status.Conditions) != 1 {
		t.Errorf("a refused spec changed the status to %v", w.Status.Conditions)
	}
}

func TestNewReportsEveryMissingInput(t *testing.T) {
	_, err := kubeservice.New(nil, nil, "")
	if err == nil {
		t.Fatal("New accepted no client, no informer and no source ID")
	}
	for _, want := range []string{"client", "informer", "sourceID"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}
