package kubeservice

import (
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/workwire/sdk-go/internal/testsupport/testcerts"
)

// AgentCSR returns the CSR an OCM agent of cluster sends: a fresh key's
// request for "system:open-cluster-management:<cluster>:<agent>" in the
// cluster's group and ManagedClustersGroup, or in orgs if not nil.
func AgentCSR(t testing.TB, cluster, agent string, orgs []string) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	if orgs == nil {
		orgs = []string{AgentCommonNamePrefix + cluster, ManagedClustersGroup}
	}
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: cluster + "-", Labels: map[string]string{ClusterNameLabel: cluster}},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    testcerts.CertificateRequest(t, AgentCommonNamePrefix+cluster+":"+agent, orgs...),
			SignerName: GRPCSigner,
			Usages:     agentUsages,
		},
	}
}

// AddOnCSR returns the CSR OCM's registration agent sends for add-on addon
// of cluster: its default subject, for the kube-apiserver client signer.
func AddOnCSR(t testing.TB, cluster, addon string) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	own := AgentCommonNamePrefix + "cluster:" + cluster + ":addon:" + addon
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "addon-" + cluster + "-" + addon + "-",
			Labels: map[string]string{ClusterNameLabel: cluster, AddOnNameLabel: addon}},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    testcerts.CertificateRequest(t, own+":agent:agent1", own),
			SignerName: certificatesv1.KubeAPIServerClientSignerName,
			Usages:     agentUsages,
		},
	}
}
