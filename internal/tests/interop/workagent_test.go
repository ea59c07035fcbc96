package interop

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	workclient "open-cluster-management.io/api/client/work/clientset/versioned"
	workv1client "open-cluster-management.io/api/client/work/clientset/versioned/typed/work/v1"
	workinformers "open-cluster-management.io/api/client/work/informers/externalversions"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/internal/testsupport/kubetest"
	"github.com/workwire/sdk-go/internal/testsupport/proctest"
	"github.com/workwire/sdk-go/options/grpc/grpctest"
	"github.com/workwire/sdk-go/options/grpc/server"
	"github.com/workwire/sdk-go/options/mqtt/mqtttest"
	"github.com/workwire/sdk-go/work"
	"github.com/workwire/sdk-go/work/kubeservice"
)

// OCM's work agent, of each release, run as a process as the klusterlet deploys it,
// takes works from workwire: over gRPC from workwire's broker with the
// ManifestWork Service over the hub's kube-apiserver (the hub controller
// writes works there), and over MQTT from a workwire hub holder (the hub
// controller writes works through its clientset). Either way a work's
// Deployment is applied to the managed cluster's kube-apiserver, its status
// and status feedback come back, an update is applied, and a delete removes
// the Deployment and, after the agent's Deleted, the work. One
// kube-apiserver is both the hub and the managed cluster.
func TestOCMWorkAgentTakesWorksFromWorkwire(t *testing.T) {
	forEachOCMRelease(t, testOCMWorkAgentTakesWorksFromWorkwire)
}

func testOCMWorkAgentTakesWorksFromWorkwire(t *testing.T, ocm ocmRelease) {
	bin := ocm.program(t, "work")
	const cluster = "cluster1"
	t.Run("grpc", func(t *testing.T) {
		cfg := workCluster(t, cluster)
		works := workclient.NewForConfigOrDie(cfg)
		informers := workinformers.NewSharedInformerFactory(works, 0)
		svc, err := kubeservice.New(works, informers.Work().V1().ManifestWorks(), server.DefaultSourceID, kubeservice.WithLogger(logr.Discard()))
		if err != nil {
			t.Fatal(err)
		}
		srv := grpctest.NewServer(t, server.WithService(codec.ManifestBundlesDataType.String(), svc))
		ctx, cancel := context.WithCancel(context.Background())
		informers.Start(ctx.Done())
		done := make(chan struct{})
		go func() { defer close(done); svc.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done; informers.Shutdown() })
		informers.WaitForCacheSync(ctx.Done())

		agent := startWorkAgent(t, bin, cfg, cluster, "grpc", yamlFile(t, "grpc.yaml", "url: "+srv.Addr()))
		driveOCMWorkAgent(t, works.WorkV1().ManifestWorks(cluster), kubernetes.NewForConfigOrDie(cfg), agent)
	})
	t.Run("mqtt", func(t *testing.T) {
		cfg := workCluster(t, cluster)
		source := unique("hub")
		file := ocmMQTTFile(t, mqtttest.NewBroker(t).Addr(), source)
		holder := startHolder(t, work.NewClientHolderBuilder(mqttConfig(t, file)).WithSourceID(source).WithLogger(logr.Discard()))
		t.Cleanup(func() { closeHolder(t, holder) })

		agent := startWorkAgent(t, bin, cfg, cluster, "mqtt", file)
		driveOCMWorkAgent(t, holder.WorkInterface().WorkV1().ManifestWorks(cluster), kubernetes.NewForConfigOrDie(cfg), agent)
	})
}

// workCluster starts the kube-apiserver of a hub and a managed cluster in
// one: OCM's ManifestWork and AppliedManifestWork CRDs, the cluster's
// namespace and the klusterlet's.
func workCluster(t *testing.T, cluster string) *rest.Config {
	t.Helper()
	cfg := kubetest.Start(t)
	kubetest.InstallOCMCRDs(t, cfg)
	kubetest.InstallCRDs(t, cfg, kubetest.ModuleFile(t, kubetest.OCMAPIModule, "work/v1/0000_01_work.open-cluster-management.io_appliedmanifestworks.crd.yaml"))
	kubetest.CreateNamespaces(t, cfg, cluster, agentNamespace)
	return cfg
}

// startWorkAgent runs OCM's work agent of cluster as the klusterlet does,
// its works from driver's broker as config says.
func startWorkAgent(t *testing.T, bin string, cfg *rest.Config, cluster, driver, config string) *proctest.Process {
	t.Helper()
	return startProgram(t, "work-agent-"+driver, bin, nil, append([]string{
		"agent", "--spoke-cluster-name=" + cluster, "--cloudevents-client-id=" + cluster + "-work-agent",
		"--workload-source-driver=" + driver, "--workload-source-config=" + config,
		"--kubeconfig=" + kubetest.Kubeconfig(t, cfg), "--status-sync-interval=1s",
		"--namespace=" + agentNamespace, "--listen=" + freeListen(t)},
		ifListed(t, bin, "agent", "--disable-leader-election")...)...)
}

// driveOCMWorkAgent creates, updates and deletes a work of a Deployment
// through works, and checks each step on the managed cluster (kube) and in
// the work's status.
func driveOCMWorkAgent(t *testing.T, works workv1client.ManifestWorkInterface, kube kubernetes.Interface, agent *proctest.Process) {
	t.Helper()
	ctx := context.Background()
	procs := []*proctest.Process{agent}
	began := time.Now()
	w := &workv1.ManifestWork{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: workv1.ManifestWorkSpec{
			Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{deploymentManifest(t, 2)}},
			ManifestConfigs: []workv1.ManifestConfigOption{{
				ResourceIdentifier: workv1.ResourceIdentifier{Group: "apps", Resource: "deployments", Namespace: "default", Name: "web"},
				FeedbackRules:      []workv1.FeedbackRule{{Type: workv1.JSONPathsType, JsonPaths: []workv1.JsonPath{{Name: "replicas", Path: ".spec.replicas"}}}},
			}},
		},
	}
	created, err := works.Create(ctx, w, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitApplied(t, works, kube, procs, created.Name, 2)
	firstApplied := time.Since(began)

	updated := time.Now()
	if err := retryConflict(func() error {
		cur, err := works.Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec.Workload.Manifests = []workv1.Manifest{deploymentManifest(t, 3)}
		_, err = works.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	waitApplied(t, works, kube, procs, "web", 3)
	updateApplied := time.Since(updated)

	deleted := time.Now()
	if err := works.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the Deployment deleted from the managed cluster", time.Minute, procs, func() bool {
		_, err := kube.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	waitFor(t, "the work gone from the hub after the agent's Deleted", time.Minute, procs, func() bool {
		_, err := works.Get(ctx, "web", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	t.Logf("OCM's work agent: first work applied with its feedback after %s, an update after %s, a delete done after %s",
		firstApplied.Round(10*time.Millisecond), updateApplied.Round(10*time.Millisecond), time.Since(deleted).Round(10*time.Millisecond))
}

// waitApplied waits for the work's Deployment with replicas on the
// managed cluster, and the work Applied at its generation with that
// feedback.
func waitApplied(t *testing.T, works workv1client.ManifestWorkInterface, kube kubernetes.Interface, procs []*proctest.Process, name string, replicas int64) {
	t.Helper()
	ctx := context.Background()
	waitFor(t, "the Deployment on the managed cluster", time.Minute, procs, func() bool {
		d, err := kube.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
		return err == nil && d.Spec.Replicas != nil && int64(*d.Spec.Replicas) == replicas
	})
	waitFor(t, "the work Applied with its feedback", time.Minute, procs, func() bool {
		w, err := works.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		c := meta.FindStatusCondition(w.Status.Conditions, workv1.WorkApplied)
		return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == w.Generation && feedback(w, "replicas") == replicas
	})
}

// feedback returns the integer status feedback name of the work's first
// manifest, or -1.
func feedback(w *workv1.ManifestWork, name string) int64 {
	for _, m := range w.Status.ResourceStatus.Manifests {
		for _, v := range m.StatusFeedbacks.Values {
			if v.Name == name && v.Value.Integer != nil {
				return *v.Value.Integer
			}
		}
	}
	return -1
}

// deploymentManifest is a Deployment "web" in namespace default with
// replicas.
func deploymentManifest(t *testing.T, replicas int32) workv1.Manifest {
	t.Helper()
	labels := map[string]string{"app": "web"}
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.example/web:1"}}},
			},
		},
	}
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return workv1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}}
}
