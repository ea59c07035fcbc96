package kubeservice

import (
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/workwire/sdk-go/internal/testsupport/testcerts"
	"github.com/workwire/sdk-go/options/grpc/server"
)

// Each CSR an agent may not ask for is refused, as Forbidden, with what
// is wrong; the one it may is created for the verified user, whatever it
// claimed.
func TestAnAgentsCSRIsChecked(t *testing.T) {
	agent := server.Identity{User: "system:bootstrap:abc123"}
	for _, tc := range []struct {
		name   string
		change func(*certificatesv1.CertificateSigningRequest)
		id     server.Identity
		want   string // in the error; "" for none
	}{
		{name: "an agent's own", id: agent},
		{name: "no signer: the gRPC one", id: agent, change: func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "" }},
		{name: "for another cluster", id: agent, want: `an agent of cluster "cluster1" asks for`,
			change: func(c *certificatesv1.CertificateSigningRequest) {
				c.Spec.Request = AgentCSR(t, "cluster2", "agent1", nil).Spec.Request
			}},
		{name: "a forged csr-user", id: agent, want: `names "system:admin", but the request comes from "system:bootstrap:abc123"`,
			change: func(c *certificatesv1.CertificateSigningRequest) {
				c.Annotations = map[string]string{CSRUserAnnotation: "system:admin"}
			}},
		{name: "a malformed PEM", id: agent, want: "not a PEM certificate request",
			change: func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Request = []byte("-----BEGIN GARBAGE-----") }},
		{name: "a corrupt request", id: agent, want: "spec.request:",
			change: func(c *certificatesv1.CertificateSigningRequest) {
				c.Spec.Request = []byte(strings.Replace(string(c.Spec.Request), "M", "N", 3))
			}},
		{name: "another signer", id: agent, want: `signer "kubernetes.io/kube-apiserver-client"`,
			change: func(c *certificatesv1.CertificateSigningRequest) {
				c.Spec.SignerName = "kubernetes.io/kube-apiserver-client"
			}},
		{name: "system:masters", id: agent, want: `organization "system:masters"`,
			change: func(c *certificatesv1.CertificateSigningRequest) {
				c.Spec.Request = AgentCSR(t, "cluster1", "agent1", []string{"system:masters"}).Spec.Request
			}},
		{name: "a server certificate", id: agent, want: `usage "server auth"`,
			change: func(c *certificatesv1.CertificateSigningRequest) {
				c.Spec.Usages = append(c.Spec.Usages, certificatesv1.UsageServerAuth)
			}},
		{name: "no verified identity", want: "no verified identity"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			csr := AgentCSR(t, "cluster1", "agent1", nil)
			if tc.change != nil {
				tc.change(csr)
			}
			out, err := csrToCreate(csr, tc.id)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if out.Spec.SignerName != GRPCSigner || out.Annotations[CSRUserAnnotation] != tc.id.User || len(out.Annotations) != 1 {
					t.Errorf("to create: signer %q, annotations %v", out.Spec.SignerName, out.Annotations)
				}
				return
			}
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v: want Forbidden saying %q", err, tc.want)
			}
		})
	}
}

// An add-on's CSR names its registration's signer and the add-on's own
// identity on its cluster; one naming another cluster, an agent's identity,
// or the agents' signer is Forbidden.
func TestAnAddOnsCSRIsChecked(t *testing.T) {
	agent := server.Identity{User: "system:open-cluster-management:cluster1:agent1"}
	other := AgentCommonNamePrefix + "cluster:cluster2:addon:helloworld"
	for _, tc := range []struct {
		name   string
		change func(*certificatesv1.CertificateSigningRequest)
		want   string // in the error; "" for none
	}{
		{name: "an add-on's own"},
		{name: "a subject its registration configures", change: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = testcerts.CertificateRequest(t, "helloworld-agent", "helloworld-users")
		}},
		{name: "naming another cluster", want: `common name "` + other + `:agent:agent1"`, change: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = testcerts.CertificateRequest(t, other+":agent:agent1", other)
		}},
		{name: "in another cluster's group", want: `organization "` + other + `"`, change: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = testcerts.CertificateRequest(t, "helloworld-agent", other)
		}},
		{name: "as the cluster's agent", want: `common name "system:open-cluster-management:cluster1:agent1"`, change: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = AgentCSR(t, "cluster1", "agent1", nil).Spec.Request
		}},
		{name: "for the agents' signer", want: `never ` + GRPCSigner, change: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.SignerName = GRPCSigner
		}},
		{name: "with no signer", want: `signer ""`, change: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.SignerName = ""
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			csr := AddOnCSR(t, "cluster1", "helloworld")
			if tc.change != nil {
				tc.change(csr)
			}
			out, err := csrToCreate(csr, agent)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if out.Spec.SignerName != certificatesv1.KubeAPIServerClientSignerName || out.Labels[AddOnNameLabel] != "helloworld" || out.Annotations[CSRUserAnnotation] != agent.User {
					t.Errorf("to create: signer %q, labels %v, annotations %v", out.Spec.SignerName, out.Labels, out.Annotations)
				}
				return
			}
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v: want Forbidden saying %q", err, tc.want)
			}
		})
	}
}
