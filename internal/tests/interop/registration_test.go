package interop

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubetypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clusterclient "open-cluster-management.io/api/client/cluster/clientset/versioned"
	clusterinformers "open-cluster-management.io/api/client/cluster/informers/externalversions"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	ocmcluster "open-cluster-management.io/sdk-go/pkg/cloudevents/clients/cluster"
	ocmcsr "open-cluster-management.io/sdk-go/pkg/cloudevents/clients/csr"
	ocmevent "open-cluster-management.io/sdk-go/pkg/cloudevents/clients/event"
	ocmlease "open-cluster-management.io/sdk-go/pkg/cloudevents/clients/lease"
	ocmoptions "open-cluster-management.io/sdk-go/pkg/cloudevents/clients/options"
	ocmstore "open-cluster-management.io/sdk-go/pkg/cloudevents/clients/store"

	"github.com/workwire/sdk-go/internal/testsupport/kubefake"
	"github.com/workwire/sdk-go/internal/testsupport/kubetest"
	"github.com/workwire/sdk-go/internal/testsupport/testcerts"
	"github.com/workwire/sdk-go/options/grpc/grpctest"
	"github.com/workwire/sdk-go/options/grpc/server"
	registrationhub "github.com/workwire/sdk-go/registration/hub"
	"github.com/workwire/sdk-go/registration/kubeservice"
)

// OCM sdk-go v1.3.0's agent-side registration clients — the cluster, CSR,
// lease and event clients its klusterlet builds over gRPC — against
// workwire's broker with the registration Services over a real
// kube-apiserver: a cluster joins, its CSR is created for the hub to
// approve and comes back signed, its lease is renewed, its events are
// recorded, and its status lands in the kube-apiserver.
func TestOCMRegistrationClientsWorkwireBroker(t *testing.T) {
	cfg := kubetest.Start(t)
	kubetest.InstallCRDs(t, cfg, kubetest.ModuleFile(t, "open-cluster-management.io/api", "cluster/v1/0000_00_clusters.open-cluster-management.io_managedclusters.crd.yaml"))
	const cluster = "cluster1"
	kubetest.CreateNamespaces(t, cfg, cluster)
	kube := kubernetes.NewForConfigOrDie(cfg)
	clusters := clusterclient.NewForConfigOrDie(cfg)

	kubeInf := informers.NewSharedInformerFactory(kube, 0)
	clusterInf := clusterinformers.NewSharedInformerFactory(clusters, 0)
	clusterSvc, err := kubeservice.NewManagedClusters(clusters, clusterInf.Cluster().V1().ManagedClusters(), server.DefaultSourceID)
	if err != nil {
		t.Fatal(err)
	}
	csrSvc, err := kubeservice.NewCSRs(kube, kubeInf.Certificates().V1().CertificateSigningRequests(), server.DefaultSourceID)
	if err != nil {
		t.Fatal(err)
	}
	leaseSvc, err := kubeservice.NewLeases(kube, kubeInf.Coordination().V1().Leases(), server.DefaultSourceID)
	if err != nil {
		t.Fatal(err)
	}
	eventSvc, err := kubeservice.NewEvents(kube, server.DefaultSourceID)
	if err != nil {
		t.Fatal(err)
	}
	infCtx, stopInformers := context.WithCancel(context.Background())
	kubeInf.Start(infCtx.Done())
	clusterInf.Start(infCtx.Done())
	t.Cleanup(func() { stopInformers(); kubeInf.Shutdown(); clusterInf.Shutdown() })
	kubeInf.WaitForCacheSync(infCtx.Done())
	clusterInf.WaitForCacheSync(infCtx.Done())
	srv := grpctest.NewServer(t,
		server.WithService(kubeservice.ManagedClusterCodec.DataType().String(), clusterSvc),
		server.WithService(kubeservice.CSRCodec.DataType().String(), csrSvc),
		server.WithService(kubeservice.LeaseCodec.DataType().String(), leaseSvc),
		server.WithService(kubeservice.EventCodec.DataType().String(), eventSvc))
	grpcOpts := ocmGRPCOptions(t, writeFile(t, "agent.yaml", "url: "+srv.Addr()+"\n"))

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	hubCtx := context.Background()

	// The cluster joins: the hub stores it, and sends it back down.
	clusterHolder, err := ocmcluster.NewClientHolder(ctx, ocmoptions.NewGenericClientOptions(grpcOpts, ocmcluster.NewManagedClusterCodec(), cluster).WithClusterName(cluster))
	if err != nil {
		t.Fatal(err)
	}
	agentClusters := clusterHolder.ClusterInterface().ClusterV1().ManagedClusters()
	// As a klusterlet does: an informer over the agent's clientset
	// consumes what the OCM client stores.
	agentInf := clusterinformers.NewSharedInformerFactory(clusterHolder.ClusterInterface(), 0)
	agentInf.Cluster().V1().ManagedClusters().Informer()
	agentInf.Start(ctx.Done())
	t.Cleanup(func() { cancel(); agentInf.Shutdown() })
	if _, err := agentClusters.Create(ctx, &clusterv1.ManagedCluster{
		ObjectMeta: metav1.ObjectMeta{Name: cluster}, Spec: clusterv1.ManagedClusterSpec{LeaseDurationSeconds: 60},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the OCM agent creating its cluster: %v", err)
	}
	within(t, "the cluster on the hub and back at the agent", func() bool {
		_, err := agentClusters.Get(ctx, cluster, metav1.GetOptions{})
		return err == nil
	})
	// Its status, patched at the agent, lands in the kube-apiserver.
	patch := []byte(`{"status":{"conditions":[{"type":"ManagedClusterJoined","status":"True","reason":"Joined","message":"joined","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`)
	within(t, "the agent's status patch to land", func() bool {
		_, err := agentClusters.Patch(ctx, cluster, kubetypes.MergePatchType, patch, metav1.PatchOptions{}, "status")
		if err != nil {
			return false
		}
		c, err := clusters.ClusterV1().ManagedClusters().Get(hubCtx, cluster, metav1.GetOptions{})
		return err == nil && meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1.ManagedClusterConditionJoined)
	})

	// Its CSR: created for the hub to approve, signed by the hub, and
	// back at the agent with its certificate.
	csrHolder, err := ocmcsr.NewAgentClientHolder(ctx, ocmoptions.NewGenericClientOptions(grpcOpts, ocmcsr.NewCSRCodec(), cluster).WithClusterName(cluster))
	if err != nil {
		t.Fatal(err)
	}
	var informers sync.WaitGroup
	informers.Go(func() { csrHolder.Informer().Run(ctx.Done()) })
	t.Cleanup(func() { cancel(); informers.Wait() })
	csr := agentCSR(t, cluster, "agent1")
	if _, err := csrHolder.Clients().Create(ctx, csr, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the OCM agent creating its CSR: %v", err)
	}
	var hubCSR *certificatesv1.CertificateSigningRequest
	within(t, "the CSR on the hub", func() bool {
		list, err := kube.CertificatesV1().CertificateSigningRequests().List(hubCtx, metav1.ListOptions{})
		if err != nil || len(list.Items) != 1 {
			return false
		}
		hubCSR = &list.Items[0]
		return true
	})
	if hubCSR.Spec.SignerName != kubeservice.GRPCSigner || hubCSR.Annotations[kubeservice.CSRUserAnnotation] == "" {
		t.Errorf("the hub's CSR: signer %q, annotations %v", hubCSR.Spec.SignerName, hubCSR.Annotations)
	}
	hubCSR.Status.Conditions = append(hubCSR.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "Approved", Message: "by the test"})
	if hubCSR, err = kube.CertificatesV1().CertificateSigningRequests().UpdateApproval(hubCtx, hubCSR.Name, hubCSR, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	hubCSR.Status.Certificate = signedCertificate(t, cluster)
	if _, err := kube.CertificatesV1().CertificateSigningRequests().UpdateStatus(hubCtx, hubCSR, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	within(t, "the certificate at the agent", func() bool {
		got, err := csrHolder.Clients().Get(ctx, hubCSR.Name, metav1.GetOptions{})
		return err == nil && len(got.Status.Certificate) > 0
	})

	// Its lease: the hub's, renewed by the agent.
	if _, err := kube.CoordinationV1().Leases(cluster).Create(hubCtx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "managed-cluster-lease", Namespace: cluster},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	leases, err := ocmlease.NewLeaseClient(ctx, ocmoptions.NewGenericClientOptions(grpcOpts, ocmlease.NewLeaseCodec(), cluster).
		WithClusterName(cluster).WithClientWatcherStore(ocmstore.NewSimpleStore[*coordinationv1.Lease]()), cluster)
	if err != nil {
		t.Fatal(err)
	}
	within(t, "the agent to renew its lease", func() bool {
		lease, err := leases.Get(ctx, "managed-cluster-lease", metav1.GetOptions{})
		if err != nil {
			return false
		}
		now := metav1.NewMicroTime(time.Now())
		lease.Spec.RenewTime = &now
		if _, err := leases.Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
			return false
		}
		got, err := kube.CoordinationV1().Leases(cluster).Get(hubCtx, "managed-cluster-lease", metav1.GetOptions{})
		return err == nil && got.Spec.RenewTime != nil
	})

	// Its events.
	events, err := ocmevent.NewClientHolder(ctx, ocmoptions.NewGenericClientOptions(grpcOpts, ocmevent.NewEventCodec(), cluster).
		WithClusterName(cluster).WithSubscription(false).WithResyncEnabled(false))
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("%s.joined", cluster)
	if _, err := events.Events(cluster).Create(ctx, &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cluster},
		EventTime:  metav1.NewMicroTime(time.Now()), ReportingController: "klusterlet", ReportingInstance: "agent1",
		Action: "Join", Reason: "Joined", Type: corev1.EventTypeNormal, Note: "joined over gRPC",
		Regarding: corev1.ObjectReference{Kind: "Lease", Name: "managed-cluster-lease", Namespace: cluster},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the OCM agent recording an event: %v", err)
	}
	if _, err := kube.EventsV1().Events(cluster).Get(hubCtx, name, metav1.GetOptions{}); err != nil {
		t.Errorf("the agent's event on the hub: %v", err)
	}
}

// within polls cond until it holds, for up to a minute.
func within(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// agentCSR is the CSR an OCM agent of cluster asks for: a fresh key's
// request for its agent name in the cluster's groups.
func agentCSR(t *testing.T, cluster, agent string) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: cluster + "-", Labels: map[string]string{kubeservice.ClusterNameLabel: cluster}},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request: testcerts.CertificateRequest(t, kubeservice.AgentCommonNamePrefix+cluster+":"+agent,
				kubeservice.AgentCommonNamePrefix+cluster, kubeservice.ManagedClustersGroup),
			SignerName: kubeservice.GRPCSigner,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth},
		},
	}
}

// signedCertificate is a certificate as a signer writes it into a CSR's
// status: here one of a test CA's.
func signedCertificate(t *testing.T, cluster string) []byte {
	t.Helper()
	pair := testcerts.NewCA(t).Client(t, kubeservice.AgentCommonNamePrefix+cluster+":agent1")
	data, err := os.ReadFile(pair.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// An OCM agent (sdk-go v1.3.0's cluster client) presenting an expired
// client certificate is refused at the TLS handshake by workwire's hub, and
// the refusal is counted as such; the same agent with a valid certificate
// creates its cluster.
func TestAnOCMAgentWithAnExpiredCertificateIsRefused(t *testing.T) {
	f := kubefake.NewHub()
	h, err := registrationhub.New(registrationhub.Config{Kube: f.Kube, Cluster: f.Cluster, AddOn: f.AddOn})
	if err != nil {
		t.Fatal(err)
	}
	startCtx, cancelStart := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelStart()
	if err := h.Start(startCtx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	ca := testcerts.NewCA(t)
	serving := ca.Server(t, "hub")
	reg := prometheus.NewRegistry()
	srv := grpctest.NewServerWithConfig(t, server.Config{TLS: server.TLSConfig{CertFile: serving.CertFile, KeyFile: serving.KeyFile, ClientCAFile: ca.CAFile()}},
		append(h.ServerOptions(), server.WithAuthenticator(server.CertificateAuthenticator{}), server.WithAuthorizer(registrationhub.Authorizer{}),
			server.WithRegisterer(reg))...)
	agent := kubeservice.AgentCommonNamePrefix + "cluster1:agent1"
	join := func(cert testcerts.Pair, within time.Duration) error {
		opts := ocmGRPCOptions(t, writeFile(t, "agent.yaml", fmt.Sprintf("url: %s\ncaFile: %s\nclientCertFile: %s\nclientKeyFile: %s\n",
			srv.Addr(), ca.CAFile(), cert.CertFile, cert.KeyFile)))
		ctx, cancel := context.WithTimeout(context.Background(), within)
		defer cancel()
		holder, err := ocmcluster.NewClientHolder(ctx, ocmoptions.NewGenericClientOptions(opts, ocmcluster.NewManagedClusterCodec(), "cluster1").WithClusterName("cluster1"))
		if err != nil {
			return err
		}
		_, err = holder.ClusterInterface().ClusterV1().ManagedClusters().Create(ctx, &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: "cluster1"}}, metav1.CreateOptions{})
		return err
	}
	if err := join(ca.ClientUntil(t, agent, time.Now().Add(-time.Minute)), 5*time.Second); err == nil {
		t.Fatal("an OCM agent with an expired certificate created its cluster")
	}
	// Under TLS 1.3 the agent can see the refusal before the hub's
	// handshake returns and counts it.
	waitFor(t, "the refused handshake counted as expired", 10*time.Second, nil, func() bool {
		return counterOf(t, reg, "grpc_server_tls_handshake_failures_total", "reason", "expired") >= 1
	})
	if _, err := f.Cluster.ClusterV1().ManagedClusters().Get(context.Background(), "cluster1", metav1.GetOptions{}); err == nil {
		t.Error("the cluster exists on the hub")
	}
	if err := join(ca.Client(t, agent), 30*time.Second); err != nil {
		t.Fatalf("the OCM agent with a valid certificate: %v", err)
	}
}

// counterOf returns the value of the counter name whose label is value.
func counterOf(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
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
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
