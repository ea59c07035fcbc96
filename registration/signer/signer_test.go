package signer_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/workwire/sdk-go/internal/testsupport/kubetest"
	"github.com/workwire/sdk-go/internal/testsupport/testcerts"
	"github.com/workwire/sdk-go/registration/kubeservice"
	"github.com/workwire/sdk-go/registration/signer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const autoUser = "system:bootstrap:auto"

// csr is a request as the CSR Service creates it for user.
func csr(t *testing.T, name, cluster, user string, request []byte) *certificatesv1.CertificateSigningRequest {
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{kubeservice.ClusterNameLabel: cluster},
			Annotations: map[string]string{kubeservice.CSRUserAnnotation: user}},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request: request, SignerName: kubeservice.GRPCSigner,
			Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth},
		},
	}
}

func agentRequest(t *testing.T, cluster string) []byte {
	return testcerts.CertificateRequest(t, kubeservice.AgentCommonNamePrefix+cluster+":agent1",
		kubeservice.AgentCommonNamePrefix+cluster, kubeservice.ManagedClustersGroup)
}

// The signer approves only the requests of auto-approved users, issues
// the certificate of every approved request of its signer — for client
// auth, for the validity asked, chained to its CA — and leaves alone what
// another actor has not approved, what was denied, and other signers'.
// A request it may not sign fails with the reason.
func TestTheSignerIssuesApprovedRequests(t *testing.T) {
	cfg := kubetest.Start(t)
	kube := kubernetes.NewForConfigOrDie(cfg)
	ca := testcerts.NewCA(t)
	inf := informers.NewSharedInformerFactory(kube, 0)
	s, err := signer.New(kube, inf.Certificates().V1().CertificateSigningRequests(), ca.CertPEM, ca.KeyPEM(t),
		signer.WithValidity(time.Hour), signer.WithAutoApprove(autoUser))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	inf.Start(ctx.Done())
	go func() { defer close(done); s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; inf.Shutdown() })

	csrs := kube.CertificatesV1().CertificateSigningRequests()
	create := func(c *certificatesv1.CertificateSigningRequest) {
		t.Helper()
		if _, err := csrs.Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ten := int32(600)
	auto := csr(t, "auto", "cluster1", autoUser, agentRequest(t, "cluster1"))
	auto.Spec.ExpirationSeconds = &ten
	create(auto)
	create(csr(t, "pending", "cluster2", "system:bootstrap:other", agentRequest(t, "cluster2")))
	create(csr(t, "forged", "cluster3", autoUser, agentRequest(t, "cluster1"))) // asks for another cluster's name
	other := csr(t, "other-signer", "cluster1", autoUser, agentRequest(t, "cluster1"))
	other.Spec.SignerName = "example.com/other"
	create(other)

	issued := waitFor(t, ctx, kube, "auto", func(c *certificatesv1.CertificateSigningRequest) bool { return len(c.Status.Certificate) > 0 })
	block, _ := pem.Decode(issued.Status.Certificate)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("the certificate does not chain to the CA for client auth: %v", err)
	}
	if cert.Subject.CommonName != kubeservice.AgentCommonNamePrefix+"cluster1:agent1" {
		t.Errorf("common name %q", cert.Subject.CommonName)
	}
	if life := cert.NotAfter.Sub(cert.NotBefore); life > 11*time.Minute+time.Second {
		t.Errorf("valid for %v, asked for 10 minutes", life)
	}

	failed := waitFor(t, ctx, kube, "forged", func(c *certificatesv1.CertificateSigningRequest) bool {
		return hasCondition(c, certificatesv1.CertificateFailed)
	})
	if len(failed.Status.Certificate) > 0 || !strings.Contains(conditionMessage(failed, certificatesv1.CertificateFailed), `an agent of cluster "cluster3"`) {
		t.Errorf("the forged request: certificate %d bytes, failure %q", len(failed.Status.Certificate), conditionMessage(failed, certificatesv1.CertificateFailed))
	}

	// Another actor approves the pending one; the signer issues it.
	pending, err := csrs.Get(ctx, "pending", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if hasCondition(pending, certificatesv1.CertificateApproved) || len(pending.Status.Certificate) > 0 {
		t.Fatal("the signer approved a request of a user not auto-approved")
	}
	pending.Status.Conditions = append(pending.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "ByTheTest"})
	if _, err := csrs.UpdateApproval(ctx, "pending", pending, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, kube, "pending", func(c *certificatesv1.CertificateSigningRequest) bool { return len(c.Status.Certificate) > 0 })

	if o, err := csrs.Get(ctx, "other-signer", metav1.GetOptions{}); err != nil || len(o.Status.Conditions) > 0 || len(o.Status.Certificate) > 0 {
		t.Errorf("another signer's request was touched: %+v, %v", o.Status, err)
	}
}

func waitFor(t *testing.T, ctx context.Context, kube kubernetes.Interface, name string, cond func(*certificatesv1.CertificateSigningRequest) bool) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		c, err := kube.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
		if err == nil && cond(c) {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for CSR %s: %+v, %v", name, c, err)
		}
	}
}

func hasCondition(c *certificatesv1.CertificateSigningRequest, typ certificatesv1.RequestConditionType) bool {
	for _, cond := range c.Status.Conditions {
		if cond.Type == typ {
			return true
		}
	}
	return false
}

func conditionMessage(c *certificatesv1.CertificateSigningRequest, typ certificatesv1.RequestConditionType) string {
	for _, cond := range c.Status.Conditions {
		if cond.Type == typ {
			return cond.Message
		}
	}
	return ""
}

func TestNewRefusesABadCAOrValidity(t *testing.T) {
	inf := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	ca := testcerts.NewCA(t)
	leaf := ca.Client(t, "not-a-ca")
	for name, pair := range map[string][2][]byte{
		"garbage":            {[]byte("x"), []byte("y")},
		"not a CA":           {leaf.CertPEM, leaf.KeyPEM},
		"a key not the CA's": {ca.CertPEM, leaf.KeyPEM},
	} {
		if _, err := signer.New(fake.NewClientset(), inf.Certificates().V1().CertificateSigningRequests(), pair[0], pair[1]); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
	for _, d := range []time.Duration{0, -time.Hour} {
		if _, err := signer.New(fake.NewClientset(), inf.Certificates().V1().CertificateSigningRequests(), ca.CertPEM, ca.KeyPEM(t),
			signer.WithValidity(d)); err == nil || !strings.Contains(err.Error(), "validity") {
			t.Errorf("validity %v: %v, want an error naming it", d, err)
		}
	}
}

// With WithApproveRenewals the signer approves an agent's request for a
// certificate of its own name, and nothing else: not another agent's
// name, not a bootstrap user's request.
func TestTheSignerApprovesRenewalsWhenAsked(t *testing.T) {
	cfg := kubetest.Start(t)
	kube := kubernetes.NewForConfigOrDie(cfg)
	ca := testcerts.NewCA(t)
	inf := informers.NewSharedInformerFactory(kube, 0)
	s, err := signer.New(kube, inf.Certificates().V1().CertificateSigningRequests(), ca.CertPEM, ca.KeyPEM(t),
		signer.WithApproveRenewals())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	inf.Start(ctx.Done())
	go func() { defer close(done); s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; inf.Shutdown() })

	agent1 := kubeservice.AgentCommonNamePrefix + "cluster1:agent1"
	for _, c := range []*certificatesv1.CertificateSigningRequest{
		csr(t, "renewal", "cluster1", agent1, agentRequest(t, "cluster1")),
		csr(t, "another-agents-name", "cluster1", kubeservice.AgentCommonNamePrefix+"cluster1:agent2", agentRequest(t, "cluster1")),
		csr(t, "bootstrap", "cluster1", "system:bootstrap:abc123", agentRequest(t, "cluster1")),
	} {
		if _, err := kube.CertificatesV1().CertificateSigningRequests().Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The same request, created by another identity than the signer's (and
	// the CSR Service's): its annotation is that identity's word alone.
	other := rest.CopyConfig(cfg)
	other.Impersonate = rest.ImpersonationConfig{UserName: "someone-else", Groups: []string{"system:masters"}}
	if _, err := kubernetes.NewForConfigOrDie(other).CertificatesV1().CertificateSigningRequests().Create(ctx,
		csr(t, "forged-renewal", "cluster1", agent1, agentRequest(t, "cluster1")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	renewed := waitFor(t, ctx, kube, "renewal", func(c *certificatesv1.CertificateSigningRequest) bool { return len(c.Status.Certificate) > 0 })
	if !hasCondition(renewed, certificatesv1.CertificateApproved) {
		t.Errorf("issued without approval: %+v", renewed.Status.Conditions)
	}
	// The renewal was issued on its second pass (its approval queues it
	// again), after the signer's one worker took the other two, queued
	// before: by now it has decided on them too.
	for _, name := range []string{"another-agents-name", "bootstrap", "forged-renewal"} {
		c, err := kube.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
		if err != nil || len(c.Status.Conditions) > 0 || len(c.Status.Certificate) > 0 {
			t.Errorf("%s: %+v, %v, want it left to another actor", name, c.Status, err)
		}
	}
}
