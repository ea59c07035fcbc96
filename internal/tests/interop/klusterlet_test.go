package interop

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	addonclient "open-cluster-management.io/api/client/addon/clientset/versioned"
	clusterclient "open-cluster-management.io/api/client/cluster/clientset/versioned"
	clusterv1 "open-cluster-management.io/api/cluster/v1"

	"github.com/workwire/sdk-go/internal/testsupport/kubetest"
	"github.com/workwire/sdk-go/internal/testsupport/proctest"
	"github.com/workwire/sdk-go/internal/testsupport/testcerts"
	"github.com/workwire/sdk-go/options/grpc/grpctest"
	"github.com/workwire/sdk-go/options/grpc/server"
	registrationhub "github.com/workwire/sdk-go/registration/hub"
	"github.com/workwire/sdk-go/registration/kubeservice"
	"github.com/workwire/sdk-go/registration/signer"
)

// What OCM's klusterlet keeps on its managed cluster.
const (
	agentNamespace = "open-cluster-management-agent"
	addonNamespace = "open-cluster-management-agent-addon"
	hubSecret      = "hub-kubeconfig-secret"
)

// OCM's klusterlet registration agent, of each release,, run as OCM deploys it with
// --registration-auth=grpc, joins a workwire hub (registration/hub over a
// real kube-apiserver, on workwire's gRPC server) with a bootstrap token:
// its ManagedCluster is created, its CSR of the gRPC signer approved and
// signed, its hub credentials written to the managed cluster; it becomes
// Joined and Available, renews its lease, rotates its certificate before
// expiry and goes on with the new one; and it registers add-ons both ways
// OCM does over gRPC — a CSR of the add-on's signer, and a token through a
// ServiceAccount token request. The test plays OCM's hub controllers where
// workwire has none: it accepts the cluster and gives it its lease, signs
// the add-on's certificate as the add-on's signer would, and readies the
// add-on's service account as OCM's add-on manager does. One kube-apiserver
// is both the hub and the managed cluster.
func TestOCMKlusterletJoinsAWorkwireHub(t *testing.T) {
	forEachOCMRelease(t, testOCMKlusterletJoinsAWorkwireHub)
}

func testOCMKlusterletJoinsAWorkwireHub(t *testing.T, ocm ocmRelease) {
	bin := ocm.program(t, "registration")
	cfg := kubetest.Start(t)
	kubetest.InstallOCMCRDs(t, cfg)
	kubetest.InstallCRDs(t, cfg, kubetest.ModuleFile(t, kubetest.OCMAPIModule, "cluster/v1alpha1/0000_02_clusters.open-cluster-management.io_clusterclaims.crd.yaml"))
	const cluster, agentID = "cluster1", "agent1"
	kubetest.CreateNamespaces(t, cfg, cluster, agentNamespace, addonNamespace)
	kube := kubernetes.NewForConfigOrDie(cfg)
	clusters := clusterclient.NewForConfigOrDie(cfg)
	addons := addonclient.NewForConfigOrDie(cfg)
	ctx := context.Background()

	// The hub: workwire's registration Services and signer, on a gRPC
	// server with TLS that takes the bootstrap token and the certificates
	// its CA issues. Certificates live a minute, so the agent rotates one
	// within the test.
	ca := testcerts.NewCA(t)
	const validity = time.Minute
	h, err := registrationhub.New(registrationhub.Config{Kube: kube, Cluster: clusters, AddOn: addons, CACert: ca.CertPEM, CAKey: ca.KeyPEM(t),
		SignerOptions: []signer.Option{signer.WithValidity(validity), signer.WithApproveRenewals()}})
	if err != nil {
		t.Fatal(err)
	}
	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := h.Start(startCtx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	serving := ca.Server(t, "hub")
	const bootstrapToken = "cluster1-bootstrap-token"
	srv := grpctest.NewServerWithConfig(t, server.Config{TLS: server.TLSConfig{CertFile: serving.CertFile, KeyFile: serving.KeyFile, ClientCAFile: ca.CAFile()}},
		append(h.ServerOptions(),
			server.WithAuthenticator(server.AnyAuthenticator(server.StaticAuthenticator{Tokens: map[string]server.Identity{
				bootstrapToken: {User: "system:bootstrap:" + cluster, Groups: []string{"system:bootstrappers"}}}}, server.CertificateAuthenticator{})),
			server.WithAuthorizer(registrationhub.Authorizer{Bootstrap: []string{"group:system:bootstrappers"}}))...)

	// The klusterlet's registration agent, as OCM deploys it for gRPC.
	hubDir := t.TempDir()
	agent := startProgram(t, "registration-agent", bin, []string{"CERT_CALLBACK_REFRESH_DURATION=5s"}, append([]string{
		"agent", "--registration-auth=grpc",
		"--spoke-cluster-name=" + cluster, "--agent-id=" + agentID,
		"--kubeconfig=" + kubetest.Kubeconfig(t, cfg),
		"--bootstrap-kubeconfig=" + kubetest.Kubeconfig(t, cfg),
		"--grpc-bootstrap-config=" + yamlFile(t, "bootstrap.yaml", "url: "+srv.Addr(), "caFile: "+ca.CAFile(), "token: "+bootstrapToken),
		"--hub-kubeconfig-dir=" + hubDir, "--grpc-config=" + hubDir + "/config.yaml",
		"--addon-kubeclient-registration-auth=token",
		"--cluster-healthcheck-period=5s",
		"--namespace=" + agentNamespace, "--listen=" + freeListen(t)},
		ifListed(t, bin, "agent", "--disable-leader-election")...)...)
	procs := []*proctest.Process{agent}
	started := time.Now()

	// Joining: the cluster and its CSR of the gRPC signer, created for the
	// bootstrap identity the server verified; the CSR approved once the
	// cluster exists, as OCM's hub approves it, and signed. (An approval
	// before the cluster is created can end OCM's bootstrap while its
	// create is in flight: the klusterlet cancels it and tries again only
	// after an hour or two.)
	waitFor(t, "the ManagedCluster", time.Minute, procs, func() bool {
		_, err := clusters.ClusterV1().ManagedClusters().Get(ctx, cluster, metav1.GetOptions{})
		return err == nil
	})
	var pending *certificatesv1.CertificateSigningRequest
	waitFor(t, "the agent's CSR", time.Minute, procs, func() bool {
		pending = clusterCSR(t, kube, cluster, func(c *certificatesv1.CertificateSigningRequest) bool {
			return c.Labels[kubeservice.AddOnNameLabel] == ""
		})
		return pending != nil
	})
	approve(t, kube, pending)
	var joinCSR *certificatesv1.CertificateSigningRequest
	waitFor(t, "the agent's CSR signed", time.Minute, procs, func() bool {
		joinCSR = clusterCSR(t, kube, cluster, func(c *certificatesv1.CertificateSigningRequest) bool { return len(c.Status.Certificate) > 0 })
		return joinCSR != nil
	})
	if joinCSR.Spec.SignerName != kubeservice.GRPCSigner || joinCSR.Annotations[kubeservice.CSRUserAnnotation] != "system:bootstrap:"+cluster {
		t.Errorf("the CSR: signer %q, user %q", joinCSR.Spec.SignerName, joinCSR.Annotations[kubeservice.CSRUserAnnotation])
	}
	var firstCert *x509.Certificate
	waitFor(t, "the hub credentials on the managed cluster", time.Minute, procs, func() bool {
		firstCert = secretCert(t, kube, agentNamespace, hubSecret)
		return firstCert != nil
	})
	if want := kubeservice.AgentCommonNamePrefix + cluster + ":" + agentID; firstCert.Subject.CommonName != want {
		t.Errorf("the agent's certificate is of %q, want %q", firstCert.Subject.CommonName, want)
	}
	joined := time.Since(started)
	// The agent rotates its certificate in the last fifth of its life, but
	// looks at it only when its secret changes and every five minutes, and
	// these live one: from now on, whatever the test waits for, the secret
	// is touched every few seconds while its certificate is in that fifth,
	// as the five-minute check would, so the agent never holds an expired
	// one however slow the steps are.
	nudgeRotations(t, kube)

	// The hub accepts the cluster, as OCM's registration controller does,
	// and gives it its lease.
	acceptCluster(t, clusters, kube, cluster)
	waitFor(t, "the cluster Joined and Available", 2*time.Minute, procs, func() bool {
		c, err := clusters.ClusterV1().ManagedClusters().Get(ctx, cluster, metav1.GetOptions{})
		return err == nil && meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1.ManagedClusterConditionJoined) &&
			meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1.ManagedClusterConditionAvailable)
	})
	available := time.Since(started)
	renewedAt := leaseRenewTime(t, kube, cluster)
	waitFor(t, "the lease renewed", time.Minute, procs, func() bool { return leaseRenewTime(t, kube, cluster).After(renewedAt) })

	// Add-ons: one by a CSR of its own signer, one by a token.
	//lint:ignore SA1019 the hub's add-ons are v1alpha1, as OCM's admins write them
	registerAddOn(t, addons, cluster, "helloworld", addonv1alpha1.RegistrationConfig{SignerName: "example.com/helloworld"})
	//lint:ignore SA1019 the hub's add-ons are v1alpha1, as OCM's admins write them
	registerAddOn(t, addons, cluster, "tokenaddon", addonv1alpha1.RegistrationConfig{SignerName: certificatesv1.KubeAPIServerClientSignerName})

	addonCA := testcerts.NewCA(t)
	var addonCSR *certificatesv1.CertificateSigningRequest
	waitFor(t, "the add-on's CSR", time.Minute, procs, func() bool {
		addonCSR = clusterCSR(t, kube, cluster, func(c *certificatesv1.CertificateSigningRequest) bool {
			return c.Labels[kubeservice.AddOnNameLabel] == "helloworld"
		})
		return addonCSR != nil
	})
	if addonCSR.Spec.SignerName != "example.com/helloworld" || addonCSR.Annotations[kubeservice.CSRUserAnnotation] != firstCert.Subject.CommonName {
		t.Errorf("the add-on's CSR: signer %q, user %q", addonCSR.Spec.SignerName, addonCSR.Annotations[kubeservice.CSRUserAnnotation])
	}
	signAsAddOnSigner(t, kube, addonCA, addonCSR)
	waitFor(t, "the add-on's certificate on the managed cluster", time.Minute, procs, func() bool {
		return secretCert(t, kube, addonNamespace, "helloworld-example.com-helloworld-client-cert") != nil
	})

	readyServiceAccount(t, kube, addons, cluster, "tokenaddon")
	var token string
	waitFor(t, "the add-on's token on the managed cluster", time.Minute, procs, func() bool {
		s, err := kube.CoreV1().Secrets(addonNamespace).Get(ctx, "tokenaddon-hub-kubeconfig", metav1.GetOptions{})
		token = string(s.Data["token"])
		return err == nil && token != ""
	})
	review, err := kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "system:serviceaccount:" + cluster + ":tokenaddon-agent"; !review.Status.Authenticated || review.Status.User.Username != want {
		t.Errorf("the add-on's token authenticates %v as %q, want %q", review.Status.Authenticated, review.Status.User.Username, want)
	}
	// What the klusterlet wrote of the add-on's status (in v1beta1 since
	// OCM v1.3) is stored with the registrations it was given intact.
	waitFor(t, "the token add-on's driver in its status on the hub", time.Minute, procs, func() bool {
		a, err := addons.AddonV1alpha1().ManagedClusterAddOns(cluster).Get(ctx, "tokenaddon", metav1.GetOptions{})
		return err == nil && a.Status.KubeClientDriver == "token"
	})
	for name, signer := range map[string]string{"helloworld": "example.com/helloworld", "tokenaddon": certificatesv1.KubeAPIServerClientSignerName} {
		a, err := addons.AddonV1alpha1().ManagedClusterAddOns(cluster).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		//lint:ignore SA1019 the hub's add-ons are v1alpha1, as OCM's admins write them
		if len(a.Status.Registrations) != 1 || a.Status.Registrations[0].SignerName != signer {
			t.Errorf("add-on %s's registrations on the hub: %+v, want one of signer %s", name, a.Status.Registrations, signer)
		}
	}

	// Rotation: before its certificate expires, the agent asks for a new
	// one with its own (the hub approves such renewals), writes it, and
	// goes on renewing its lease with it.
	waitFor(t, "the certificate rotated", 2*validity, procs, func() bool {
		c := secretCert(t, kube, agentNamespace, hubSecret)
		return c != nil && c.SerialNumber.Cmp(firstCert.SerialNumber) != 0
	})
	rotated := time.Since(started)
	if left := time.Until(firstCert.NotAfter); left <= 0 {
		t.Errorf("the certificate was rotated %s after it expired", -left)
	}
	renewedAt = leaseRenewTime(t, kube, cluster)
	waitFor(t, "the lease renewed after the rotation and the old certificate's expiry", validity+time.Minute, procs, func() bool {
		return time.Now().After(firstCert.NotAfter) && leaseRenewTime(t, kube, cluster).After(renewedAt)
	})
	t.Logf("OCM %s's klusterlet on a workwire hub: credentials after %s, Joined and Available after %s (the hub accepting it at once), rotated after %s",
		ocm.name, joined.Round(100*time.Millisecond), available.Round(100*time.Millisecond), rotated.Round(100*time.Millisecond))
}

// nudgeRotations touches the agent's hub secret every two seconds while
// the certificate in it is in the last fifth of its life, until t ends.
func nudgeRotations(t *testing.T, kube kubernetes.Interface) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(2 * time.Second):
			}
			s, err := kube.CoreV1().Secrets(agentNamespace).Get(ctx, hubSecret, metav1.GetOptions{})
			if err != nil {
				continue
			}
			c, err := parseCert(s.Data["tls.crt"])
			if err != nil || c == nil || time.Until(c.NotAfter) >= c.NotAfter.Sub(c.NotBefore)/5 {
				continue
			}
			patch := fmt.Sprintf(`{"metadata":{"annotations":{"workwire.io/checked":%q}}}`, time.Now().Format(time.RFC3339Nano))
			_, _ = kube.CoreV1().Secrets(agentNamespace).Patch(ctx, hubSecret, k8stypes.MergePatchType, []byte(patch), metav1.PatchOptions{})
		}
	}()
}

// clusterCSR returns cluster's newest CSR that match says is the one, or
// nil.
func clusterCSR(t *testing.T, kube kubernetes.Interface, cluster string, match func(*certificatesv1.CertificateSigningRequest) bool) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	list, err := kube.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{LabelSelector: kubeservice.ClusterNameLabel + "=" + cluster})
	if err != nil {
		t.Fatal(err)
	}
	var newest *certificatesv1.CertificateSigningRequest
	for i := range list.Items {
		c := &list.Items[i]
		if match(c) && (newest == nil || newest.CreationTimestamp.Before(&c.CreationTimestamp)) {
			newest = c
		}
	}
	return newest
}

// secretCert returns the certificate in a secret's tls.crt, or nil.
func secretCert(t *testing.T, kube kubernetes.Interface, namespace, name string) *x509.Certificate {
	t.Helper()
	s, err := kube.CoreV1().Secrets(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	c, err := parseCert(s.Data["tls.crt"])
	if err != nil {
		t.Fatalf("secret %s/%s: %v", namespace, name, err)
	}
	return c
}

// parseCert returns the certificate of PEM data, nil if it holds none.
func parseCert(data []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, nil
	}
	return x509.ParseCertificate(block.Bytes)
}

// acceptCluster does what OCM's hub does for a cluster its admin accepts:
// it accepts the cluster (a short lease, to see it renewed) and gives it
// its lease in the cluster's namespace.
func acceptCluster(t *testing.T, clusters clusterclient.Interface, kube kubernetes.Interface, cluster string) {
	t.Helper()
	ctx := context.Background()
	c, err := clusters.ClusterV1().ManagedClusters().Get(ctx, cluster, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Spec.HubAcceptsClient, c.Spec.LeaseDurationSeconds = true, 5
	if c, err = clusters.ClusterV1().ManagedClusters().Update(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{Type: clusterv1.ManagedClusterConditionHubAccepted, Status: metav1.ConditionTrue,
		Reason: "HubClusterAdminAccepted", Message: "Accepted by hub cluster admin"})
	if _, err := clusters.ClusterV1().ManagedClusters().UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "managed-cluster-lease", Namespace: cluster,
		Labels: map[string]string{kubeservice.ClusterNameLabel: cluster}},
		Spec: coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: time.Now()}}}
	if _, err := kube.CoordinationV1().Leases(cluster).Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func leaseRenewTime(t *testing.T, kube kubernetes.Interface, cluster string) time.Time {
	t.Helper()
	l, err := kube.CoordinationV1().Leases(cluster).Get(context.Background(), "managed-cluster-lease", metav1.GetOptions{})
	if err != nil || l.Spec.RenewTime == nil {
		t.Fatalf("the lease: %v", err)
	}
	return l.Spec.RenewTime.Time
}

// registerAddOn creates add-on name of cluster on the hub with one
// registration, as OCM's add-on manager does.
func registerAddOn(t *testing.T, addons addonclient.Interface, cluster, name string, reg addonv1alpha1.RegistrationConfig) {
	t.Helper()
	ctx := context.Background()
	a, err := addons.AddonV1alpha1().ManagedClusterAddOns(cluster).Create(ctx, &addonv1alpha1.ManagedClusterAddOn{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cluster}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a.Status.Registrations = []addonv1alpha1.RegistrationConfig{reg}
	if _, err := addons.AddonV1alpha1().ManagedClusterAddOns(cluster).UpdateStatus(ctx, a, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// approve approves a CSR, as the hub's approver would, and returns it.
func approve(t *testing.T, kube kubernetes.Interface, csr *certificatesv1.CertificateSigningRequest) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	csr = csr.DeepCopy()
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "ApprovedByTheTest", Message: "approved by the test"})
	csr, err := kube.CertificatesV1().CertificateSigningRequests().UpdateApproval(context.Background(), csr.Name, csr, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return csr
}

// signAsAddOnSigner approves an add-on's CSR and issues its certificate,
// as the controller of the add-on's signer would.
func signAsAddOnSigner(t *testing.T, kube kubernetes.Interface, ca *testcerts.CA, csr *certificatesv1.CertificateSigningRequest) {
	t.Helper()
	ctx := context.Background()
	csr = approve(t, kube, csr)
	block, _ := pem.Decode(csr.Spec.Request)
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: req.Subject, DNSNames: req.DNSNames,
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, req.PublicKey, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	csr.Status.Certificate = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if _, err := kube.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, csr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// readyServiceAccount does what OCM's add-on manager does for an add-on
// registered by token: once the agent chose the token driver, it creates
// the add-on's service account in the cluster's namespace and says so in
// the add-on's TokenInfrastructureReady condition, with its UID.
func readyServiceAccount(t *testing.T, kube kubernetes.Interface, addons addonclient.Interface, cluster, name string) {
	t.Helper()
	ctx := context.Background()
	addonsOf := addons.AddonV1alpha1().ManagedClusterAddOns(cluster)
	// The agent's add-on controller retries a refused status patch (a
	// Conflict with the hub's newer add-on) with a growing backoff.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		a, err := addonsOf.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if a.Status.KubeClientDriver == "token" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("add-on %s: kubeClientDriver %q, want the agent to choose \"token\"; its status: %+v", name, a.Status.KubeClientDriver, a.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	sa, err := kube.CoreV1().ServiceAccounts(cluster).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name + "-agent"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		a, err := addonsOf.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		meta.SetStatusCondition(&a.Status.Conditions, metav1.Condition{Type: "TokenInfrastructureReady", Status: metav1.ConditionTrue, Reason: "TokenInfrastructureReady",
			Message: fmt.Sprintf("ServiceAccount %s/%s (UID: %s) is ready", cluster, sa.Name, sa.UID)})
		_, err = addonsOf.UpdateStatus(ctx, a, metav1.UpdateOptions{})
		if err == nil {
			return
		}
		if !strings.Contains(err.Error(), "the object has been modified") || time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
}
