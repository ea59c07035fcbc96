package kubeservice

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/workwire/sdk-go/options/grpc/server"
)

// What OCM's registration puts in and on an agent's CSR.
const (
	// GRPCSigner signs the client certificates of agents that connect
	// over gRPC; an agent's CSR names it and no other.
	GRPCSigner = "open-cluster-management.io/grpc"
	// CSRUserAnnotation holds the verified user who asked for a CSR (the
	// Service's own identity creates it): what an approver decides on.
	CSRUserAnnotation = "open-cluster-management.io/csr-user"
	// AgentCommonNamePrefix starts the common name an agent asks for:
	// "system:open-cluster-management:<cluster>:<agent>".
	AgentCommonNamePrefix = "system:open-cluster-management:"
	// ManagedClustersGroup is the group every cluster's agent is in.
	ManagedClustersGroup = "system:open-cluster-management:managed-clusters"
	// AddOnNameLabel marks an add-on's CSR, naming the add-on.
	AddOnNameLabel = "open-cluster-management.io/addon-name"
)

var csrResource = schema.GroupResource{Group: certificatesv1.GroupName, Resource: "certificatesigningrequests"}

// agentUsages are the key usages an agent's client certificate may have.
var agentUsages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth}

// csrToCreate checks an agent's CSR and returns what the Service creates:
// the request for its own cluster, signed by GRPCSigner, annotated with the
// verified user who sent it. Each refusal is a Kubernetes error the agent
// reads as such (BadRequest for a malformed request, Forbidden for one it
// may not make).
func csrToCreate(csr *certificatesv1.CertificateSigningRequest, id server.Identity) (*certificatesv1.CertificateSigningRequest, error) {
	cluster := csr.Labels[ClusterNameLabel]
	if id.User == "" {
		return nil, apierrors.NewForbidden(csrResource, csr.Name, fmt.Errorf("the request carries no verified identity"))
	}
	if user := csr.Annotations[CSRUserAnnotation]; user != "" && user != id.User {
		return nil, apierrors.NewForbidden(csrResource, csr.Name, fmt.Errorf("annotation %s names %q, but the request comes from %q", CSRUserAnnotation, user, id.User))
	}
	for _, u := range csr.Spec.Usages {
		if !slices.Contains(agentUsages, u) {
			return nil, apierrors.NewForbidden(csrResource, csr.Name, fmt.Errorf("usage %q: an agent's certificate is for client auth alone", u))
		}
	}
	signer := GRPCSigner
	if addon, ok := csr.Labels[AddOnNameLabel]; ok {
		// An add-on's certificate, for the signer its registration names.
		if csr.Spec.SignerName == "" || csr.Spec.SignerName == GRPCSigner {
			return nil, apierrors.NewForbidden(csrResource, csr.Name, fmt.Errorf("signer %q: an add-on's CSR names the signer of its registration, never %s", csr.Spec.SignerName, GRPCSigner))
		}
		if err := CheckAddOnCertificateRequest(csr.Spec.Request, cluster, addon); err != nil {
			return nil, apierrors.NewForbidden(csrResource, csr.Name, err)
		}
		signer = csr.Spec.SignerName
	} else {
		switch csr.Spec.SignerName {
		case "", GRPCSigner:
		default:
			return nil, apierrors.NewForbidden(csrResource, csr.Name, fmt.Errorf("signer %q: an agent asks %s alone (an add-on's CSR carries the label %s)", csr.Spec.SignerName, GRPCSigner, AddOnNameLabel))
		}
		if err := CheckAgentCertificateRequest(csr.Spec.Request, cluster); err != nil {
			return nil, apierrors.NewForbidden(csrResource, csr.Name, err)
		}
	}
	out := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: creatable(csr.ObjectMeta),
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:           csr.Spec.Request,
			SignerName:        signer,
			Usages:            csr.Spec.Usages,
			ExpirationSeconds: csr.Spec.ExpirationSeconds,
		},
	}
	if len(out.Spec.Usages) == 0 {
		out.Spec.Usages = agentUsages
	}
	out.Annotations = map[string]string{CSRUserAnnotation: id.User}
	return out, nil
}

// CheckAgentCertificateRequest checks the PEM certificate request of an
// agent of cluster: well formed, signed by its key, and asking only for
// what an agent of cluster may be — its common name under the cluster, its
// groups the cluster's and ManagedClustersGroup.
func CheckAgentCertificateRequest(data []byte, cluster string) error {
	req, err := parseCertificateRequest(data)
	if err != nil {
		return err
	}
	prefix := AgentCommonNamePrefix + cluster + ":"
	if cn := req.Subject.CommonName; !strings.HasPrefix(cn, prefix) || len(cn) == len(prefix) {
		return fmt.Errorf("common name %q: an agent of cluster %q asks for %s<agent>", cn, cluster, prefix)
	}
	allowed := []string{AgentCommonNamePrefix + cluster, ManagedClustersGroup}
	for _, o := range req.Subject.Organization {
		if !slices.Contains(allowed, o) {
			return fmt.Errorf("organization %q: an agent of cluster %q is in %s alone", o, cluster, strings.Join(allowed, " and "))
		}
	}
	return nil
}

// CheckAddOnCertificateRequest checks the PEM certificate request of add-on
// addon of cluster: well formed, signed by its key, and naming no identity
// of OCM's but the add-on's own on this cluster. Under OCM's prefix
// "system:open-cluster-management:" its common name, organizations and
// organizational units may be only
// "system:open-cluster-management:cluster:<cluster>:addon:<addon>" (and
// what follows it, such as ":agent:<agent>") or
// "system:open-cluster-management:addon:<addon>"; names outside the prefix
// (a subject an add-on's registration configures) are the approver's to
// decide.
func CheckAddOnCertificateRequest(data []byte, cluster, addon string) error {
	req, err := parseCertificateRequest(data)
	if err != nil {
		return err
	}
	own := AgentCommonNamePrefix + "cluster:" + cluster + ":addon:" + addon
	check := func(what, name string) error {
		if !strings.HasPrefix(name, AgentCommonNamePrefix) || name == own || strings.HasPrefix(name, own+":") ||
			name == AgentCommonNamePrefix+"addon:"+addon {
			return nil
		}
		return fmt.Errorf("%s %q: add-on %q of cluster %q is %s, and nothing else of %s", what, name, addon, cluster, own, AgentCommonNamePrefix)
	}
	errs := []error{check("common name", req.Subject.CommonName)}
	for _, o := range req.Subject.Organization {
		errs = append(errs, check("organization", o))
	}
	for _, ou := range req.Subject.OrganizationalUnit {
		errs = append(errs, check("organizational unit", ou))
	}
	return errors.Join(errs...)
}

// parseCertificateRequest parses a CSR's PEM request and checks it is
// signed by the key it asks a certificate for.
func parseCertificateRequest(data []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, fmt.Errorf("spec.request is not a PEM certificate request")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("spec.request: %w", err)
	}
	if err := req.CheckSignature(); err != nil {
		return nil, fmt.Errorf("spec.request: %w", err)
	}
	return req, nil
}
