package kubeservice_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	grpclib "google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	addonclient "open-cluster-management.io/api/client/addon/clientset/versioned"
	addoninformers "open-cluster-management.io/api/client/addon/informers/externalversions"
	clusterclient "open-cluster-management.io/api/client/cluster/clientset/versioned"
	clusterinformers "open-cluster-management.io/api/client/cluster/informers/externalversions"
	clusterv1 "open-cluster-management.io/api/cluster/v1"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/internal/testsupport/kubetest"
	"github.com/workwire/sdk-go/options/grpc/grpctest"
	"github.com/workwire/sdk-go/options/grpc/protocol"
	"github.com/workwire/sdk-go/options/grpc/server"
	"github.com/workwire/sdk-go/registration/kubeservice"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// hub is a real kube-apiserver with OCM's cluster and add-on CRDs, the
// namespaces of two clusters, and every Service of this package over it.
type hub struct {
	kube     kubernetes.Interface
	clusters clusterclient.Interface
	addons   addonclient.Interface

	clusterSvc *kubeservice.Service[*clusterv1.ManagedCluster]
	csrSvc     *kubeservice.Service[*certificatesv1.CertificateSigningRequest]
	leaseSvc   *kubeservice.Service[*coordinationv1.Lease]
	eventSvc   *kubeservice.Service[*eventsv1.Event]
	addonSvc   *kubeservice.Service[*addonv1alpha1.ManagedClusterAddOn]
	addonBeta  *kubeservice.Service[*addonv1beta1.ManagedClusterAddOn]
	changes    *changes
}

func startHub(t *testing.T) *hub {
	t.Helper()
	cfg := kubetest.Start(t)
	kubetest.InstallOCMCRDs(t, cfg)
	kubetest.CreateNamespaces(t, cfg, "cluster1", "cluster2")
	h := &hub{
		kube:     kubernetes.NewForConfigOrDie(cfg),
		clusters: clusterclient.NewForConfigOrDie(cfg),
		addons:   addonclient.NewForConfigOrDie(cfg),
		changes:  &changes{},
	}
	kubeInf := informers.NewSharedInformerFactory(h.kube, 0)
	clusterInf := clusterinformers.NewSharedInformerFactory(h.clusters, 0)
	addonInf := addoninformers.NewSharedInformerFactory(h.addons, 0)
	var err error
	must := func(e error) {
		t.Helper()
		if e != nil {
			t.Fatal(e)
		}
	}
	h.clusterSvc, err = kubeservice.NewManagedClusters(h.clusters, clusterInf.Cluster().V1().ManagedClusters(), server.DefaultSourceID)
	must(err)
	h.csrSvc, err = kubeservice.NewCSRs(h.kube, kubeInf.Certificates().V1().CertificateSigningRequests(), server.DefaultSourceID)
	must(err)
	h.leaseSvc, err = kubeservice.NewLeases(h.kube, kubeInf.Coordination().V1().Leases(), server.DefaultSourceID)
	must(err)
	h.eventSvc, err = kubeservice.NewEvents(h.kube, server.DefaultSourceID)
	must(err)
	h.addonSvc, err = kubeservice.NewAddOns(h.addons, addonInf.Addon().V1alpha1().ManagedClusterAddOns(), server.DefaultSourceID)
	must(err)
	h.addonBeta, err = kubeservice.NewAddOnsV1beta1(h.addons, addonInf.Addon().V1alpha1().ManagedClusterAddOns(), server.DefaultSourceID)
	must(err)
	h.leaseSvc.RegisterHandler(h.changes)
	ctx, cancel := context.WithCancel(context.Background())
	for _, f := range []interface {
		Start(<-chan struct{})
		Shutdown()
	}{kubeInf, clusterInf, addonInf} {
		f.Start(ctx.Done())
		t.Cleanup(f.Shutdown)
	}
	t.Cleanup(cancel)
	kubeInf.WaitForCacheSync(ctx.Done())
	clusterInf.WaitForCacheSync(ctx.Done())
	addonInf.WaitForCacheSync(ctx.Done())
	return h
}

// changes records what a Service told the server.
type changes struct {
	mu      sync.Mutex
	created []string
}

func (c *changes) OnCreate(_ context.Context, _, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.created = append(c.created, id)
	return nil
}
func (c *changes) OnUpdate(context.Context, string, string) error { return nil }
func (c *changes) OnDelete(context.Context, string, string) error { return nil }

func (c *changes) wasCreated(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, got := range c.created {
		if got == id {
			return true
		}
	}
	return false
}

// agentEvent is obj as an OCM agent sends it.
func agentEvent[T codec.Object](t *testing.T, c *codec.KubeCodec[T], sub types.SubResource, action types.Action, obj T) *cloudevents.Event {
	t.Helper()
	evt, err := c.Encode("cluster1-agent", types.EventType{DataType: c.DataType(), SubResource: sub, Action: action}, obj)
	if err != nil {
		t.Fatal(err)
	}
	return evt
}

// asAgent is the context of a call of cluster1's agent.
func asAgent(user string) context.Context {
	return server.WithIdentity(context.Background(), server.Identity{User: user})
}

// kubeReason returns the reason of the Kubernetes error an agent reads from
// err, as OCM's agents do: FailedPrecondition carrying the status as JSON.
func kubeReason(t *testing.T, err error) metav1.StatusReason {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.FailedPrecondition {
		t.Fatalf("error %v: want FailedPrecondition carrying a Kubernetes status", err)
	}
	var body struct{ ErrStatus metav1.Status }
	if err := json.Unmarshal([]byte(st.Message()), &body); err != nil {
		t.Fatalf("error message %q: %v", st.Message(), err)
	}
	return body.ErrStatus.Reason
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// An agent creates its ManagedCluster (without the cluster set and the
// acceptance it asked for: the hub decides those) and reports its status, with the version it
// read: a stale one is a Conflict it can read as one. It may not change its
// spec, nor write another cluster's.
func TestAnAgentCreatesItsClusterAndReportsItsStatus(t *testing.T) {
	h := startHub(t)
	ctx := asAgent("system:open-cluster-management:cluster1:agent1")
	join := &clusterv1.ManagedCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster1", Labels: map[string]string{kubeservice.ClusterSetLabel: "production", "region": "eu"}},
		Spec:       clusterv1.ManagedClusterSpec{HubAcceptsClient: true, LeaseDurationSeconds: 60},
	}
	if err := h.clusterSvc.HandleStatusUpdate(ctx, agentEvent(t, kubeservice.ManagedClusterCodec, types.SubResourceSpec, types.CreateRequest, join)); err != nil {
		t.Fatalf("create: %v", err)
	}
	stored, err := h.clusters.ClusterV1().ManagedClusters().Get(context.Background(), "cluster1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := stored.Labels[kubeservice.ClusterSetLabel]; ok || stored.Labels["region"] != "eu" {
		t.Errorf("stored labels %v: want the agent's without the cluster set", stored.Labels)
	}
	if stored.Spec.HubAcceptsClient || stored.Spec.LeaseDurationSeconds != 60 {
		t.Errorf("stored spec %+v: want the agent's, not accepted by the hub (the hub's to decide)", stored.Spec)
	}

	// The Service serves it to the agent: the whole object, its version its
	// resourceVersion.
	var got *cloudevents.Event
	eventually(t, "the informer to hold cluster1", func() bool {
		got, err = h.clusterSvc.Get(context.Background(), string(stored.UID))
		return err == nil
	})
	if rv, _, _ := types.StringExtension(got, types.ExtResourceVersion); rv != stored.ResourceVersion {
		t.Errorf("resourceversion %q, want the resourceVersion %q", rv, stored.ResourceVersion)
	}
	if list, err := h.clusterSvc.List(context.Background(), server.ListOptions{ClusterName: "cluster1"}); err != nil || len(list) != 1 {
		t.Errorf("List of cluster1: %d, %v", len(list), err)
	}

	meta.SetStatusCondition(&stored.Status.Conditions, metav1.Condition{Type: clusterv1.ManagedClusterConditionJoined, Status: metav1.ConditionTrue, Reason: "Joined"})
	if err := h.clusterSvc.HandleStatusUpdate(ctx, agentEvent(t, kubeservice.ManagedClusterCodec, types.SubResourceStatus, types.UpdateRequest, stored)); err != nil {
		t.Fatalf("status update: %v", err)
	}
	err = h.clusterSvc.HandleStatusUpdate(ctx, agentEvent(t, kubeservice.ManagedClusterCodec, types.SubResourceStatus, types.UpdateRequest, stored))
	if r := kubeReason(t, err); r != metav1.StatusReasonConflict {
		t.Errorf("a status at a stale version: reason %q, want Conflict", r)
	}
	err = h.clusterSvc.HandleStatusUpdate(ctx, agentEvent(t, kubeservice.ManagedClusterCodec, types.SubResourceSpec, types.UpdateRequest, stored))
	if r := kubeReason(t, err); r != metav1.StatusReasonMethodNotAllowed {
		t.Errorf("an agent updating its cluster's spec: reason %q, want MethodNotAllowed", r)
	}
	other := agentEvent(t, kubeservice.ManagedClusterCodec, types.SubResourceSpec, types.CreateRequest, &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: "cluster2"}})
	other.SetExtension(types.ExtClusterName, "cluster1")
	if err := h.clusterSvc.HandleStatusUpdate(ctx, other); status.Code(err) != codes.InvalidArgument {
		t.Errorf("cluster1's event creating cluster2: %v, want InvalidArgument", err)
	}
	if _, err := h.clusters.ClusterV1().ManagedClusters().Get(context.Background(), "cluster2", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("cluster2 exists after a refused create: %v", err)
	}
}

// An agent renews its lease; the hub's lease reaches the server as a
// change; a renewal from a stale read is a Conflict.
func TestAnAgentRenewsItsLease(t *testing.T) {
	h := startHub(t)
	ctx := asAgent("system:open-cluster-management:cluster1:agent1")
	lease, err := h.kube.CoordinationV1().Leases("cluster1").Create(context.Background(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "managed-cluster-lease", Namespace: "cluster1"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Service to tell of the lease", func() bool { return h.changes.wasCreated(string(lease.UID)) })
	now := metav1.NewMicroTime(time.Now())
	lease.Spec.RenewTime = &now
	if err := h.leaseSvc.HandleStatusUpdate(ctx, agentEvent(t, kubeservice.LeaseCodec, types.SubResourceSpec, types.UpdateRequest, lease)); err != nil {
		t.Fatalf("renew: %v", err)
	}
	got, err := h.kube.CoordinationV1().Leases("cluster1").Get(context.Background(), lease.Name, metav1.GetOptions{})
	if err != nil || got.Spec.RenewTime == nil {
		t.Fatalf("the renewal did not land: %v, %v", got, err)
	}
	err = h.leaseSvc.HandleStatusUpdate(ctx, agentEvent(t, kubeservice.LeaseCodec, types.SubResourceSpec, types.UpdateRequest, lease))
	if r := kubeReason(t, err); r != metav1.StatusReasonConflict {
		t.Errorf("a renewal from a stale read: reason %q, want Conflict", r)
	}
}

// An agent creates events and counts a series; the hub keeps only the
// series of what an update sends.
func TestAnAgentRecordsEvents(t *testing.T) {
	h := startHub(t)
	ctx := asAgent("system:open-cluster-management:cluster1:agent1")
	e := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "joined.1", Namespace: "cluster1"},
		EventTime:  metav1.NewMicroTime(time.Now()), ReportingController: "klusterlet", ReportingInstance: "agent1",
		Action: "Join", Reason: "Joined", Type: "Normal", Note: "the cluster joined",
		Regarding: corev1.ObjectReference{Kind: "Lease", Name: "managed-cluster-lease", Namespace: "cluster1"},
	}
	if err := h.eventSvc.HandleStatusUpdate(ctx, agentEvent(t, kubeservice.EventCodec, types.SubResourceSpec, types.CreateRequest, e)); err != nil {
		t.Fatalf("create: %v", err)
	}
	series := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "joined.1", Namespace: "cluster1"}, Note: "changed",
		Series: &eventsv1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(time.Now())}}
	if err := h.eventSvc.HandleStatusUpdate(ctx, agentEvent(t, kubeservice.EventCodec, types.SubResourceSpec, types.UpdateRequest, series)); err != nil {
		t.Fatalf("update: %v", err)
	}
	got, err := h.kube.EventsV1().Events("cluster1").Get(context.Background(), "joined.1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Series == nil || got.Series.Count != 2 || got.Note != "the cluster joined" {
		t.Errorf("stored event: series %v, note %q; want the series alone updated", got.Series, got.Note)
	}
}

// An agent reports its add-ons' status, for its own cluster only.
func TestAnAgentReportsItsAddOnStatus(t *testing.T) {
	h := startHub(t)
	ctx := asAgent("system:open-cluster-management:cluster1:agent1")
	addon, err := h.addons.AddonV1alpha1().ManagedClusterAddOns("cluster1").Create(context.Background(), &addonv1alpha1.ManagedClusterAddOn{
		ObjectMeta: metav1.ObjectMeta{Name: "monitoring", Namespace: "cluster1"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	meta.SetStatusCondition(&addon.Status.Conditions, metav1.Condition{Type: "Available", Status: metav1.ConditionTrue, Reason: "Running"})
	if err := h.addonSvc.HandleStatusUpdate(ctx, agentEvent(t, kubeservice.AddOnCodec, types.SubResourceStatus, types.UpdateRequest, addon)); err != nil {
		t.Fatalf("status update: %v", err)
	}
	got, err := h.addons.AddonV1alpha1().ManagedClusterAddOns("cluster1").Get(context.Background(), "monitoring", metav1.GetOptions{})
	if err != nil || !meta.IsStatusConditionTrue(got.Status.Conditions, "Available") {
		t.Errorf("stored add-on status: %v, %v", got.Status.Conditions, err)
	}
	foreign := agentEvent(t, kubeservice.AddOnCodec, types.SubResourceStatus, types.UpdateRequest, addon)
	foreign.SetExtension(types.ExtClusterName, "cluster2")
	if err := h.addonSvc.HandleStatusUpdate(ctx, foreign); status.Code(err) != codes.InvalidArgument {
		t.Errorf("cluster2's event writing cluster1's add-on: %v, want InvalidArgument", err)
	}
}

// Over the add-on CRD as OCM installs it (v1alpha1 stored, no conversion
// webhook), an agent of v1beta1 (OCM v1.3's klusterlet) reads its add-ons'
// registrations typed, and the status it writes, as a status update or as
// the answer to a status resync, is stored with them intact.
func TestAV1beta1AgentsAddOnRegistrationsSurvive(t *testing.T) {
	h := startHub(t)
	ctx := asAgent("system:open-cluster-management:cluster1:agent1")
	created, err := h.addons.AddonV1alpha1().ManagedClusterAddOns("cluster1").Create(context.Background(), &addonv1alpha1.ManagedClusterAddOn{
		ObjectMeta: metav1.ObjectMeta{Name: "monitoring", Namespace: "cluster1"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status.Registrations = []addonv1alpha1.RegistrationConfig{
		{SignerName: certificatesv1.KubeAPIServerClientSignerName, Subject: addonv1alpha1.Subject{User: "system:open-cluster-management:cluster:cluster1:addon:monitoring:agent:monitoring-agent"}},
		{SignerName: "example.com/metrics", Subject: addonv1alpha1.Subject{User: "metrics"}},
	}
	created.Status.KubeClientDriver = "csr"
	if _, err := h.addons.AddonV1alpha1().ManagedClusterAddOns("cluster1").UpdateStatus(context.Background(), created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var beta *addonv1beta1.ManagedClusterAddOn
	eventually(t, "the v1beta1 Service to hold the add-on's registrations", func() bool {
		evt, err := h.addonBeta.Get(context.Background(), string(created.UID))
		if err != nil {
			return false
		}
		beta, err = generic.Decode(kubeservice.AddOnV1beta1Codec, evt)
		return err == nil && len(beta.Status.Registrations) == 2
	})
	want := []addonv1beta1.RegistrationConfig{
		{Type: addonv1beta1.KubeClient, KubeClient: &addonv1beta1.KubeClientConfig{
			Subject: addonv1beta1.KubeClientSubject{BaseSubject: addonv1beta1.BaseSubject{User: "system:open-cluster-management:cluster:cluster1:addon:monitoring:agent:monitoring-agent"}}, Driver: "csr"}},
		{Type: addonv1beta1.CustomSigner, CustomSigner: &addonv1beta1.CustomSignerConfig{SignerName: "example.com/metrics", Subject: addonv1beta1.Subject{BaseSubject: addonv1beta1.BaseSubject{User: "metrics"}}}},
	}
	if diff := cmp.Diff(want, beta.Status.Registrations); diff != "" {
		t.Errorf("the registrations as v1beta1 (-want +got):\n%s", diff)
	}
	for _, action := range []types.Action{types.UpdateRequest, types.ResyncResponse} {
		meta.SetStatusCondition(&beta.Status.Conditions, metav1.Condition{Type: "Available", Status: metav1.ConditionTrue, Reason: string(action)})
		if err := h.addonBeta.HandleStatusUpdate(ctx, agentEvent(t, kubeservice.AddOnV1beta1Codec, types.SubResourceStatus, action, beta)); err != nil {
			t.Fatalf("status %s: %v", action, err)
		}
		got, err := h.addons.AddonV1alpha1().ManagedClusterAddOns("cluster1").Get(context.Background(), "monitoring", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c := meta.FindStatusCondition(got.Status.Conditions, "Available"); c == nil || c.Reason != string(action) {
			t.Errorf("status %s: stored conditions %v", action, got.Status.Conditions)
		}
		if diff := cmp.Diff(created.Status.Registrations, got.Status.Registrations); diff != "" || got.Status.KubeClientDriver != "csr" {
			t.Errorf("status %s: stored registrations (-want +got):\n%s driver %q", action, diff, got.Status.KubeClientDriver)
		}
		beta.ResourceVersion = got.ResourceVersion
	}
	if err := h.addonBeta.HandleStatusUpdate(ctx, agentEvent(t, kubeservice.AddOnV1beta1Codec, types.SubResourceSpec, types.UpdateRequest, beta)); kubeReason(t, err) != metav1.StatusReasonMethodNotAllowed {
		t.Errorf("a spec update of an add-on: %v, want MethodNotAllowed", err)
	}
}

// The CSR an agent asks for is created as the hub's approvers expect it:
// signed by the gRPC signer, annotated with the verified user who asked;
// a request it may not make creates nothing.
func TestAnAgentsCSRIsCreatedForItsVerifiedUser(t *testing.T) {
	h := startHub(t)
	const user = "system:bootstrap:abc123"
	csr := kubeservice.AgentCSR(t, "cluster1", "agent1", nil)
	if err := h.csrSvc.HandleStatusUpdate(asAgent(user), agentEvent(t, kubeservice.CSRCodec, types.SubResourceSpec, types.CreateRequest, csr)); err != nil {
		t.Fatalf("create: %v", err)
	}
	list, err := h.kube.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("CSRs on the hub: %d, %v; want 1", len(list.Items), err)
	}
	got := list.Items[0]
	if got.Spec.SignerName != kubeservice.GRPCSigner || got.Annotations[kubeservice.CSRUserAnnotation] != user || got.Labels[kubeservice.ClusterNameLabel] != "cluster1" {
		t.Errorf("stored CSR: signer %q, annotations %v, labels %v", got.Spec.SignerName, got.Annotations, got.Labels)
	}
	eventually(t, "the Service to serve the CSR", func() bool {
		list, err := h.csrSvc.List(context.Background(), server.ListOptions{ClusterName: "cluster1"})
		return err == nil && len(list) == 1
	})

	forged := kubeservice.AgentCSR(t, "cluster1", "agent2", nil)
	forged.Annotations = map[string]string{kubeservice.CSRUserAnnotation: "system:admin"}
	err = h.csrSvc.HandleStatusUpdate(asAgent(user), agentEvent(t, kubeservice.CSRCodec, types.SubResourceSpec, types.CreateRequest, forged))
	if r := kubeReason(t, err); r != metav1.StatusReasonForbidden {
		t.Errorf("a forged %s: reason %q, want Forbidden", kubeservice.CSRUserAnnotation, r)
	}
	if list, _ := h.kube.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{}); len(list.Items) != 1 {
		t.Errorf("%d CSRs after a refused one, want 1", len(list.Items))
	}
}

func TestNewRefusesMissingInputs(t *testing.T) {
	if _, err := kubeservice.NewLeases(nil, nil, server.DefaultSourceID); err == nil {
		t.Error("NewLeases accepted no client")
	}
	if _, err := kubeservice.NewEvents(fake.NewClientset(), ""); err == nil {
		t.Error("NewEvents accepted no source ID")
	}
}

// A refused request is counted, by cluster, data type and code, in the
// server's grpc_server_ce_processed_total.
func TestARefusedRequestIsCounted(t *testing.T) {
	h := startHub(t)
	reg := prometheus.NewRegistry()
	dt := kubeservice.CSRCodec.DataType().String()
	srv := grpctest.NewServer(t, server.WithRegisterer(reg), server.WithService(dt, h.csrSvc))
	conn, err := grpclib.NewClient(srv.Addr(), grpclib.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	forged := kubeservice.AgentCSR(t, "cluster1", "agent1", nil)
	forged.Annotations = map[string]string{kubeservice.CSRUserAnnotation: "system:admin"}
	pbe, err := protocol.ToProto(agentEvent(t, kubeservice.CSRCodec, types.SubResourceSpec, types.CreateRequest, forged))
	if err != nil {
		t.Fatal(err)
	}
	_, err = protocol.NewCloudEventServiceClient(conn).Publish(context.Background(), &protocol.PublishRequest{Event: pbe})
	if r := kubeReason(t, err); r != metav1.StatusReasonForbidden {
		t.Fatalf("a forged csr-user through the server: reason %q, want Forbidden", r)
	}
	refused := counterValue(t, reg, "grpc_server_ce_processed_total", map[string]string{
		"cluster": "cluster1", "data_type": dt, "method": "Publish", "grpc_code": codes.FailedPrecondition.String()})
	if refused != 1 {
		t.Errorf("refusals counted: %v, want 1", refused)
	}
}

// counterValue is the value of the series of counter name with labels in
// reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			match := 0
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] == l.GetValue() {
					match++
				}
			}
			if match == len(labels) {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no %s%v", name, labels)
	return 0
}
