// Package signer signs the client certificates of agents that join over
// gRPC: a hub controller that watches CertificateSigningRequests of
// signer kubeservice.GRPCSigner and, once another actor approved one,
// issues its certificate with the hub's CA. Approving stays with that other
// actor; an optional auto-approver approves the requests of named users
// (bootstrap identities), off by default.
package signer

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certinformers "k8s.io/client-go/informers/certificates/v1"
	"k8s.io/client-go/kubernetes"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/workwire/sdk-go/registration/kubeservice"
)

// DefaultValidity is how long a certificate is valid unless the request
// asks for less (spec.expirationSeconds) or WithValidity says otherwise.
const DefaultValidity = 30 * 24 * time.Hour

// Option configures a Signer.
type Option func(*settings)

type settings struct {
	validity        time.Duration
	autoApprove     []string
	approveRenewals bool
	log             logr.Logger
}

// WithValidity sets how long the certificates it issues are valid; d must
// be positive (New refuses 0 or less). Default: DefaultValidity. A request's spec.expirationSeconds shortens
// it, never lengthens it.
func WithValidity(d time.Duration) Option { return func(s *settings) { s.validity = d } }

// WithAutoApprove names the users (the CSR's
// kubeservice.CSRUserAnnotation, which the CSR Service sets from the
// verified identity) whose requests the Signer approves itself; each call
// adds to the users named before. The annotation counts only on a request
// the CSR Service created: one whose spec.username, which the
// kube-apiserver sets to its creator, is the Signer's own identity (the CSR
// Service and the Signer of a hub share its client). Default: none.
func WithAutoApprove(users ...string) Option {
	return func(s *settings) { s.autoApprove = append(s.autoApprove, users...) }
}

// WithApproveRenewals makes the Signer approve an agent's request for a
// certificate of its own name: one whose user (the verified identity that
// sent it, in the CSR's kubeservice.CSRUserAnnotation) is the common name
// it asks for, an agent's — as OCM's hub approves the rotation of an
// agent's certificate. Default: off. As for WithAutoApprove, the annotation
// counts only on a request the Signer's own identity created, so that
// whoever else may create CSRs in the hub's kube-apiserver cannot forge it.
func WithApproveRenewals() Option { return func(s *settings) { s.approveRenewals = true } }

// WithLogger sets the Signer's logger. Default: discard.
func WithLogger(l logr.Logger) Option { return func(s *settings) { s.log = l } }

// Signer issues certificates for approved requests. Run it on every
// replica of the hub or on one: issuing is idempotent (a request that has
// its certificate is left alone, and a lost race is a Conflict it drops).
type Signer struct {
	client   kubernetes.Interface
	lister   certlisters.CertificateSigningRequestLister
	informer cache.SharedIndexInformer
	ca       *x509.Certificate
	key      crypto.Signer
	opts     settings
	queue    workqueue.TypedRateLimitingInterface[string]

	// Run's worker alone reads and writes these: the Signer's own user,
	// asked of the kube-apiserver (SelfSubjectReview) when it first
	// needs it, and again at most every selfRetry while it fails.
	self      string
	selfAsked time.Time
}

// selfRetry is how often a Signer that could not learn its own identity
// asks again; meanwhile it approves nothing itself.
const selfRetry = 10 * time.Second

// New returns a Signer over client and informer, issuing with the CA whose
// certificate and key are the PEM pair caCert and caKey.
func New(client kubernetes.Interface, informer certinformers.CertificateSigningRequestInformer, caCert, caKey []byte, options ...Option) (*Signer, error) {
	if client == nil || informer == nil {
		return nil, errors.New("new signer: client and informer are required")
	}
	pair, err := tls.X509KeyPair(caCert, caKey)
	if err != nil {
		return nil, fmt.Errorf("new signer: CA: %w", err)
	}
	ca, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("new signer: CA: %w", err)
	}
	if !ca.IsCA {
		return nil, fmt.Errorf("new signer: CA %q is not a CA certificate", ca.Subject.CommonName)
	}
	key, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, errors.New("new signer: CA key cannot sign")
	}
	opts := settings{validity: DefaultValidity, log: logr.Discard()}
	for _, o := range options {
		o(&opts)
	}
	if opts.validity <= 0 {
		return nil, fmt.Errorf("new signer: validity %v: want more than 0", opts.validity)
	}
	s := &Signer{client: client, lister: informer.Lister(), informer: informer.Informer(), ca: ca, key: key, opts: opts,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "workwire-grpc-signer"})}
	if _, err := s.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    s.enqueue,
		UpdateFunc: func(_, obj any) { s.enqueue(obj) },
	}); err != nil {
		return nil, fmt.Errorf("new signer: %w", err)
	}
	return s, nil
}

func (s *Signer) enqueue(obj any) {
	if csr, ok := obj.(*certificatesv1.CertificateSigningRequest); ok && csr.Spec.SignerName == kubeservice.GRPCSigner {
		s.queue.Add(csr.Name)
	}
}

// Run handles requests until ctx ends. Start the informer's factory too.
func (s *Signer) Run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		s.queue.ShutDown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), s.informer.HasSynced) {
		return
	}
	for {
		name, shutdown := s.queue.Get()
		if shutdown {
			return
		}
		if err := s.handle(ctx, name); err != nil && !apierrors.IsConflict(err) {
			s.opts.log.Error(err, "CSR not handled; retrying", "csr", name)
			s.queue.AddRateLimited(name)
		} else {
			s.queue.Forget(name)
		}
		s.queue.Done(name)
	}
}

// handle approves a request of an auto-approved user, and issues the
// certificate of an approved one.
func (s *Signer) handle(ctx context.Context, name string) error {
	csr, err := s.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if csr.Spec.SignerName != kubeservice.GRPCSigner || len(csr.Status.Certificate) > 0 || condition(csr, certificatesv1.CertificateDenied) || condition(csr, certificatesv1.CertificateFailed) {
		return nil
	}
	if !condition(csr, certificatesv1.CertificateApproved) {
		if len(s.opts.autoApprove) == 0 && !s.opts.approveRenewals {
			return nil // another actor decides
		}
		if self := s.whoAmI(ctx); self == "" || csr.Spec.Username != self {
			// Not created by the CSR Service: its annotation may be
			// anyone's word.
			return nil
		}
		user := csr.Annotations[kubeservice.CSRUserAnnotation]
		reason, message := "AutoApproved", fmt.Sprintf("%s is an auto-approved user", user)
		switch {
		case user != "" && slices.Contains(s.opts.autoApprove, user):
		case s.opts.approveRenewals && s.isRenewal(csr, user):
			reason, message = "AutoApprovedRenewal", fmt.Sprintf("%s renews its own certificate", user)
		default:
			return nil // another actor decides
		}
		approved := csr.DeepCopy()
		approved.Status.Conditions = append(approved.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: reason,
			Message: message, LastUpdateTime: metav1.Now(),
		})
		_, err := s.client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, name, approved, metav1.UpdateOptions{})
		return err // the update brings it back, approved
	}
	cert, err := s.issue(csr)
	if err != nil {
		// The request is not one this signer may sign: say so on it, once.
		failed := csr.DeepCopy()
		failed.Status.Conditions = append(failed.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateFailed, Status: corev1.ConditionTrue, Reason: "SignerValidationFailure",
			Message: err.Error(), LastUpdateTime: metav1.Now(),
		})
		_, uerr := s.client.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, failed, metav1.UpdateOptions{})
		return uerr
	}
	signed := csr.DeepCopy()
	signed.Status.Certificate = cert
	_, err = s.client.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, signed, metav1.UpdateOptions{})
	return err
}

// whoAmI returns the Signer's own user name, or "" if the kube-apiserver
// could not say.
func (s *Signer) whoAmI(ctx context.Context) string {
	if s.self != "" || time.Since(s.selfAsked) < selfRetry {
		return s.self
	}
	s.selfAsked = time.Now()
	review, err := s.client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		s.opts.log.Error(err, "cannot learn the signer's own identity, which the requests it approves itself must come from; approving none for now")
		return ""
	}
	s.self = review.Status.UserInfo.Username
	return s.self
}

// isRenewal reports whether user, an agent of the request's cluster, asks
// for a certificate of its own name.
func (s *Signer) isRenewal(csr *certificatesv1.CertificateSigningRequest, user string) bool {
	cluster := csr.Labels[kubeservice.ClusterNameLabel]
	if cluster == "" || !strings.HasPrefix(user, kubeservice.AgentCommonNamePrefix+cluster+":") {
		return false
	}
	if kubeservice.CheckAgentCertificateRequest(csr.Spec.Request, cluster) != nil {
		return false
	}
	block, _ := pem.Decode(csr.Spec.Request)
	req, err := x509.ParseCertificateRequest(block.Bytes)
	return err == nil && req.Subject.CommonName == user
}

func condition(csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// issue returns the PEM certificate for csr: checked again as the CSR
// Service checks an agent's (anyone may create a CSR of this signer in the
// kube-apiserver), for client auth, valid from a minute ago (clocks
// differ) for the validity, and never past the CA's own.
func (s *Signer) issue(csr *certificatesv1.CertificateSigningRequest) ([]byte, error) {
	cluster := csr.Labels[kubeservice.ClusterNameLabel]
	if cluster == "" {
		return nil, fmt.Errorf("the request has no %s label", kubeservice.ClusterNameLabel)
	}
	if err := kubeservice.CheckAgentCertificateRequest(csr.Spec.Request, cluster); err != nil {
		return nil, err
	}
	block, _ := pem.Decode(csr.Spec.Request)
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, err
	}
	validity := s.opts.validity
	if e := csr.Spec.ExpirationSeconds; e != nil && time.Duration(*e)*time.Second < validity {
		validity = time.Duration(*e) * time.Second
	}
	now := time.Now()
	notAfter := now.Add(validity)
	if notAfter.After(s.ca.NotAfter) {
		notAfter = s.ca.NotAfter
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: serial,
		Subject:      req.Subject,
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, s.ca, req.PublicKey, s.key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}
