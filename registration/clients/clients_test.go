package clients_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubetypes "k8s.io/apimachinery/pkg/types"
	certificatesv1apply "k8s.io/client-go/applyconfigurations/certificates/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	addonclient "open-cluster-management.io/api/client/addon/clientset/versioned"
	clusterclient "open-cluster-management.io/api/client/cluster/clientset/versioned"
	clusterinformers "open-cluster-management.io/api/client/cluster/informers/externalversions"
	clusterv1 "open-cluster-management.io/api/cluster/v1"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/internal/testsupport/kubefake"
	"github.com/workwire/sdk-go/internal/testsupport/kubetest"
	"github.com/workwire/sdk-go/internal/testsupport/testcerts"
	"github.com/workwire/sdk-go/options/grpc/grpctest"
	"github.com/workwire/sdk-go/options/grpc/server"
	"github.com/workwire/sdk-go/registration/clients"
	"github.com/workwire/sdk-go/registration/hub"
	"github.com/workwire/sdk-go/registration/kubeservice"
)

const (
	agentUser = kubeservice.AgentCommonNamePrefix + "cluster1:agent1"
	token     = "cluster1-agent-token"
)

// testHub is a hub's kube-apiserver — the stand-in or a real one — with
// the registration Services on a gRPC broker in front of it.
type testHub struct {
	kube     kubernetes.Interface
	clusters clusterclient.Interface
	addons   addonclient.Interface
	broker   *grpctest.Server
}

func forEachHub(t *testing.T, test func(t *testing.T, h *testHub)) {
	t.Run("stand-in", func(t *testing.T) {
		f := kubefake.NewHub()
		test(t, startHub(t, f.Kube, f.Cluster, f.AddOn))
	})
	t.Run("kube-apiserver", func(t *testing.T) {
		cfg := kubetest.Start(t)
		kubetest.InstallOCMCRDs(t, cfg)
		kubetest.CreateNamespaces(t, cfg, "cluster1")
		test(t, startHub(t, kubernetes.NewForConfigOrDie(cfg), clusterclient.NewForConfigOrDie(cfg), addonclient.NewForConfigOrDie(cfg)))
	})
}

func startHub(t *testing.T, kube kubernetes.Interface, clusters clusterclient.Interface, addons addonclient.Interface) *testHub {
	t.Helper()
	h, err := hub.New(hub.Config{Kube: kube, Cluster: clusters, AddOn: addons})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	broker := grpctest.NewServer(t, append(h.ServerOptions(),
		server.WithAuthenticator(server.StaticAuthenticator{Tokens: map[string]server.Identity{
			token: {User: agentUser, Groups: []string{kubeservice.ManagedClustersGroup}}}}),
		server.WithAuthorizer(server.StaticAuthorizer{Clusters: map[string][]string{agentUser: {"cluster1"}}}))...)
	return &testHub{kube: kube, clusters: clusters, addons: addons, broker: broker}
}

// agent starts cluster1's clients of types over the broker.
func (h *testHub) agent(t *testing.T, types clients.Types) *clients.Clients {
	t.Helper()
	cfg := h.broker.Config()
	cfg.Token, cfg.AllowTokenWithoutTLS = token, true
	c, err := clients.New(&cfg, "cluster1", clients.WithTypes(types), clients.WithLogger(logr.Discard()),
		clients.WithAgentOptions(generic.WithResyncInterval(0)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return c
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// An agent's cluster clientset, under OCM's own informers: it creates its
// ManagedCluster, sees the hub's object, reports and patches its status.
func TestTheClusterClientsetJoins(t *testing.T) {
	forEachHub(t, func(t *testing.T, h *testHub) {
		agent := h.agent(t, clients.All)
		ctx, cancel := context.WithCancel(context.Background())
		factory := clusterinformers.NewSharedInformerFactory(agent.ClusterClient(), 0)
		lister := factory.Cluster().V1().ManagedClusters().Lister()
		factory.Start(ctx.Done())
		t.Cleanup(func() { cancel(); factory.Shutdown() })
		factory.WaitForCacheSync(ctx.Done())

		clusters := agent.ClusterClient().ClusterV1().ManagedClusters()
		if _, err := clusters.Create(ctx, &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: "cluster1"},
			Spec: clusterv1.ManagedClusterSpec{HubAcceptsClient: true, LeaseDurationSeconds: 60}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create: %v", err)
		}
		var mine *clusterv1.ManagedCluster
		eventually(t, "the hub's cluster in the agent's informer", func() bool {
			var err error
			mine, err = lister.Get("cluster1")
			return err == nil
		})
		if mine.UID == "" || mine.Spec.HubAcceptsClient {
			t.Errorf("the agent's informer holds %+v, want the hub's object (with a UID, not accepted: the hub decides that)", mine)
		}
		reported := mine.DeepCopy()
		meta.SetStatusCondition(&reported.Status.Conditions, metav1.Condition{Type: clusterv1.ManagedClusterConditionJoined, Status: metav1.ConditionTrue, Reason: "Joined"})
		if _, err := clusters.UpdateStatus(ctx, reported, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("update status: %v", err)
		}
		eventually(t, "the status on the hub", func() bool {
			c, err := h.clusters.ClusterV1().ManagedClusters().Get(ctx, "cluster1", metav1.GetOptions{})
			return err == nil && meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1.ManagedClusterConditionJoined)
		})
		eventually(t, "the status back in the agent's informer", func() bool {
			c, err := lister.Get("cluster1")
			return err == nil && meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1.ManagedClusterConditionJoined)
		})
		patch := []byte(`{"status":{"version":{"kubernetes":"v1.37.2"}}}`)
		if _, err := clusters.Patch(ctx, "cluster1", kubetypes.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
			t.Fatalf("patch status: %v", err)
		}
		eventually(t, "the patched status on the hub", func() bool {
			c, err := h.clusters.ClusterV1().ManagedClusters().Get(ctx, "cluster1", metav1.GetOptions{})
			return err == nil && c.Status.Version.Kubernetes == "v1.37.2" && meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1.ManagedClusterConditionJoined)
		})
		// What the Service never takes: the hub refuses it.
		// The patched status back at the agent: nothing more is on its way.
		eventually(t, "the patched status in the agent's informer", func() bool {
			c, err := lister.Get("cluster1")
			return err == nil && c.Status.Version.Kubernetes == "v1.37.2"
		})
		latest, err := clusters.Get(ctx, "cluster1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		spec := latest.DeepCopy()
		spec.Spec.HubAcceptsClient = true
		if _, err := clusters.Update(ctx, spec, metav1.UpdateOptions{}); !apierrors.IsMethodNotSupported(err) {
			t.Errorf("an agent accepting its own cluster: %v, want the hub's MethodNotAllowed", err)
		}
		if err := clusters.Delete(ctx, "cluster1", metav1.DeleteOptions{}); !apierrors.IsMethodNotSupported(err) {
			t.Errorf("delete: %v, want MethodNotAllowed", err)
		}
	})
}

// The kubernetes.Interface: a CSR created over events reaches the hub
// signed for gRPC and annotated with the agent's verified user, and comes
// back to client-go's informers; a lease the hub made is renewed; client-go's
// event recorder records an event and its series.
func TestTheKubeClientCarriesCSRsLeasesAndEvents(t *testing.T) {
	forEachHub(t, func(t *testing.T, h *testHub) {
		ctx := context.Background()
		if _, err := h.kube.CoordinationV1().Leases("cluster1").Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: "managed-cluster-lease", Namespace: "cluster1"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		agent := h.agent(t, clients.All)
		kube := agent.KubeClient()
		stop, cancel := context.WithCancel(ctx)
		factory := informers.NewSharedInformerFactory(kube, 0)
		csrLister := factory.Certificates().V1().CertificateSigningRequests().Lister()
		factory.Start(stop.Done())
		t.Cleanup(func() { cancel(); factory.Shutdown() })
		factory.WaitForCacheSync(stop.Done())

		csr := &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{Name: "cluster1-abcde", Labels: map[string]string{kubeservice.ClusterNameLabel: "cluster1"}},
			Spec: certificatesv1.CertificateSigningRequestSpec{
				Request:    testcerts.CertificateRequest(t, agentUser, kubeservice.AgentCommonNamePrefix+"cluster1", kubeservice.ManagedClustersGroup),
				SignerName: kubeservice.GRPCSigner,
				Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
			},
		}
		if _, err := kube.CertificatesV1().CertificateSigningRequests().Create(ctx, csr, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create CSR: %v", err)
		}
		eventually(t, "the hub's CSR in the agent's informer", func() bool {
			got, err := csrLister.Get("cluster1-abcde")
			return err == nil && got.Annotations[kubeservice.CSRUserAnnotation] == agentUser
		})
		if _, err := kube.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, "cluster1-abcde", csr, metav1.UpdateOptions{}); !apierrors.IsMethodNotSupported(err) {
			t.Errorf("an agent approving its CSR: %v, want MethodNotAllowed", err)
		}

		leases := kube.CoordinationV1().Leases("cluster1")
		var lease *coordinationv1.Lease
		eventually(t, "the hub's lease", func() bool {
			var err error
			lease, err = leases.Get(ctx, "managed-cluster-lease", metav1.GetOptions{})
			return err == nil
		})
		renewed := lease.DeepCopy()
		now := metav1.NewMicroTime(time.Now().Truncate(time.Microsecond))
		renewed.Spec.RenewTime = &now
		if _, err := leases.Update(ctx, renewed, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("renew: %v", err)
		}
		eventually(t, "the renewal on the hub", func() bool {
			l, err := h.kube.CoordinationV1().Leases("cluster1").Get(ctx, "managed-cluster-lease", metav1.GetOptions{})
			return err == nil && l.Spec.RenewTime != nil && l.Spec.RenewTime.Equal(&now)
		})

		// client-go's event recorder: the first event is a create, a
		// repeat within its window a series patch.
		broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: kube.EventsV1()})
		bctx, stopRecording := context.WithCancel(ctx)
		defer stopRecording()
		if err := broadcaster.StartRecordingToSinkWithContext(bctx); err != nil {
			t.Fatal(err)
		}
		defer broadcaster.Shutdown()
		recorder := broadcaster.NewRecorder(nil, "registration-agent")
		regarding := &corev1.ObjectReference{Kind: "ManagedCluster", Name: "cluster1", Namespace: "cluster1", APIVersion: "cluster.open-cluster-management.io/v1"}
		recorder.Eventf(regarding, nil, corev1.EventTypeNormal, "Joined", "Join", "cluster %s joined", "cluster1")
		var recorded eventsv1.Event
		eventually(t, "the event on the hub", func() bool {
			l, err := h.kube.EventsV1().Events("cluster1").List(ctx, metav1.ListOptions{})
			if err != nil || len(l.Items) != 1 {
				return false
			}
			recorded = l.Items[0]
			return true
		})
		if recorded.Reason != "Joined" || recorded.ReportingController != "registration-agent" {
			t.Errorf("the hub's event: %+v", recorded)
		}
		if _, err := kube.EventsV1().Events("cluster1").Get(ctx, recorded.Name, metav1.GetOptions{}); !apierrors.IsMethodNotSupported(err) {
			t.Errorf("reading an event on the agent: %v, want MethodNotAllowed (the hub sends none down)", err)
		}
		series := recorded.DeepCopy()
		series.Series = &eventsv1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(time.Now())}
		if _, err := (&events.EventSinkImpl{Interface: kube.EventsV1()}).Patch(ctx, series, []byte(`{"series":{"count":2,"lastObservedTime":"2026-11-26T10:00:00.000000Z"}}`)); err != nil {
			t.Fatalf("series patch: %v", err)
		}
		eventually(t, "the series on the hub", func() bool {
			e, err := h.kube.EventsV1().Events("cluster1").Get(ctx, recorded.Name, metav1.GetOptions{})
			return err == nil && e.Series != nil && e.Series.Count == 2
		})
	})
}

// The add-on clientset updates the status of the hub's add-on.
func TestTheAddOnClientsetReportsStatus(t *testing.T) {
	forEachHub(t, func(t *testing.T, h *testHub) {
		ctx := context.Background()
		if _, err := h.addons.AddonV1alpha1().ManagedClusterAddOns("cluster1").Create(ctx, &addonv1alpha1.ManagedClusterAddOn{
			ObjectMeta: metav1.ObjectMeta{Name: "helloworld", Namespace: "cluster1"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		agent := h.agent(t, clients.All)
		addons := agent.AddOnClient().AddonV1alpha1().ManagedClusterAddOns("cluster1")
		var addon *addonv1alpha1.ManagedClusterAddOn
		eventually(t, "the hub's add-on", func() bool {
			var err error
			addon, err = addons.Get(ctx, "helloworld", metav1.GetOptions{})
			return err == nil
		})
		available := addon.DeepCopy()
		meta.SetStatusCondition(&available.Status.Conditions, metav1.Condition{Type: addonv1alpha1.ManagedClusterAddOnConditionAvailable, Status: metav1.ConditionTrue, Reason: "Running"})
		if _, err := addons.UpdateStatus(ctx, available, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("update status: %v", err)
		}
		eventually(t, "the status on the hub", func() bool {
			a, err := h.addons.AddonV1alpha1().ManagedClusterAddOns("cluster1").Get(ctx, "helloworld", metav1.GetOptions{})
			return err == nil && meta.IsStatusConditionTrue(a.Status.Conditions, addonv1alpha1.ManagedClusterAddOnConditionAvailable)
		})
	})
}

// Bootstrap clients carry ManagedClusters and CSRs alone: every other type
// is refused before the wire, as is every resource the clientsets do not
// serve; no method of the clientsets returns nil.
func TestWhatIsNotCarriedIsMethodNotAllowed(t *testing.T) {
	f := kubefake.NewHub()
	h := startHub(t, f.Kube, f.Cluster, f.AddOn)
	agent := h.agent(t, clients.Bootstrap)
	ctx := context.Background()
	kube := agent.KubeClient()
	for what, err := range map[string]error{
		"a lease":     second(kube.CoordinationV1().Leases("cluster1").Update(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l"}}, metav1.UpdateOptions{})),
		"an event":    second(kube.EventsV1().Events("cluster1").Create(ctx, &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e"}}, metav1.CreateOptions{})),
		"an add-on":   second(agent.AddOnClient().AddonV1alpha1().ManagedClusterAddOns("cluster1").List(ctx, metav1.ListOptions{})),
		"pods":        second(kube.CoreV1().Pods("cluster1").List(ctx, metav1.ListOptions{})),
		"a CSR apply": second(kube.CertificatesV1().CertificateSigningRequests().Apply(ctx, certificatesv1apply.CertificateSigningRequest("cluster1-abcde"), metav1.ApplyOptions{FieldManager: "agent"})),
		"placements":  second(agent.ClusterClient().ClusterV1beta1().Placements("cluster1").List(ctx, metav1.ListOptions{})),
	} {
		if !apierrors.IsMethodNotSupported(err) {
			t.Errorf("%s: %v, want MethodNotAllowed", what, err)
		}
	}
	if _, err := kube.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("bootstrap clients list CSRs: %v", err)
	}
	resources, err := kube.Discovery().ServerResourcesForGroupVersion("certificates.k8s.io/v1")
	if err != nil || len(resources.APIResources) != 1 || resources.APIResources[0].Name != "certificatesigningrequests" {
		t.Errorf("discovery of certificates.k8s.io/v1: %+v, %v", resources, err)
	}
	for _, cs := range []any{kube, agent.ClusterClient(), agent.AddOnClient()} {
		v := reflect.ValueOf(cs)
		for i := range v.NumMethod() {
			m := v.Method(i)
			if m.Type().NumIn() != 0 || m.Type().NumOut() != 1 {
				continue
			}
			if out := m.Call(nil)[0]; out.IsNil() {
				t.Errorf("%T.%s() is nil", cs, v.Type().Method(i).Name)
			}
		}
	}
}

func second[T any](_ T, err error) error { return err }

// An agent asks for tokens of its cluster's service accounts on the hub
// with client-go's CreateToken: the hub issues them through the
// kube-apiserver's TokenRequest API. One of another namespace is Forbidden
// before the wire; the hub's refusal (a service account it lacks) is the
// call's error.
func TestTheKubeClientCreatesTokens(t *testing.T) {
	cfg := kubetest.Start(t)
	kubetest.InstallOCMCRDs(t, cfg)
	kubetest.CreateNamespaces(t, cfg, "cluster1")
	h := startHub(t, kubernetes.NewForConfigOrDie(cfg), clusterclient.NewForConfigOrDie(cfg), addonclient.NewForConfigOrDie(cfg))
	ctx := context.Background()
	if _, err := h.kube.CoreV1().ServiceAccounts("cluster1").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "helloworld-agent"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	agent := h.agent(t, clients.All|clients.TokenRequests)
	sas := agent.KubeClient().CoreV1().ServiceAccounts("cluster1")
	expiry := int64(3600)
	answer, err := sas.CreateToken(ctx, "helloworld-agent", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create token: %v", err)
	}
	review, err := h.kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: answer.Status.Token}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "system:serviceaccount:cluster1:helloworld-agent"; !review.Status.Authenticated || review.Status.User.Username != want {
		t.Errorf("the token authenticates %v as %q, want %q", review.Status.Authenticated, review.Status.User.Username, want)
	}

	_, err = agent.KubeClient().CoreV1().ServiceAccounts("cluster2").CreateToken(ctx, "helloworld-agent", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("a token of another cluster's service account: %v, want Forbidden", err)
	}
	_, err = sas.CreateToken(ctx, "missing", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("a token of a service account the hub lacks: %v, want NotFound", err)
	}
	if _, err := sas.Get(ctx, "helloworld-agent", metav1.GetOptions{}); !apierrors.IsMethodNotSupported(err) {
		t.Errorf("get a service account: %v, want MethodNotAllowed", err)
	}
}

// ManagedClusterAddOns of v1beta1 are carried beside v1alpha1: the agent
// reads its add-on, which the hub stores as v1alpha1, and reports its
// status in v1beta1.
func TestTheAddOnClientsetServesV1beta1(t *testing.T) {
	forEachHub(t, func(t *testing.T, h *testHub) {
		ctx := context.Background()
		if _, err := h.addons.AddonV1alpha1().ManagedClusterAddOns("cluster1").Create(ctx, &addonv1alpha1.ManagedClusterAddOn{
			ObjectMeta: metav1.ObjectMeta{Name: "helloworld", Namespace: "cluster1"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		agent := h.agent(t, clients.All|clients.AddOnsV1beta1)
		addons := agent.AddOnClient().AddonV1beta1().ManagedClusterAddOns("cluster1")
		var addon *addonv1beta1.ManagedClusterAddOn
		eventually(t, "the hub's add-on", func() bool {
			var err error
			addon, err = addons.Get(ctx, "helloworld", metav1.GetOptions{})
			return err == nil
		})
		available := addon.DeepCopy()
		meta.SetStatusCondition(&available.Status.Conditions, metav1.Condition{Type: addonv1beta1.ManagedClusterAddOnConditionAvailable, Status: metav1.ConditionTrue, Reason: "Running"})
		if _, err := addons.UpdateStatus(ctx, available, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("update status: %v", err)
		}
		eventually(t, "the status on the hub", func() bool {
			a, err := h.addons.AddonV1alpha1().ManagedClusterAddOns("cluster1").Get(ctx, "helloworld", metav1.GetOptions{})
			return err == nil && meta.IsStatusConditionTrue(a.Status.Conditions, addonv1beta1.ManagedClusterAddOnConditionAvailable)
		})
	})
}
