package kubeservice

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AgentCSR returns the CSR an OCM agent of cluster sends: a fresh key's
// request for "system:open-cluster-management:<cluster>:<agent>" in the
// cluster's group and ManagedClustersGroup, or in orgs if not nil.
func AgentCSR(t testing.TB, cluster, agent string, orgs []string) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if orgs == nil {
		orgs = []string{AgentCommonNamePrefix + cluster, ManagedClustersGroup}
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: AgentCommonNamePrefix + cluster + ":" + agent, Organization: orgs},
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: cluster + "-", Labels: map[string]string{ClusterNameLabel: cluster}},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: GRPCSigner,
			Usages:     agentUsages,
		},
	}
}
