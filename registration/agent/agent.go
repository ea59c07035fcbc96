// Package agent registers a cluster with a hub over the gRPC broker, as
// OCM's registration agent does over a kubeconfig: with a
// bootstrap identity it creates its ManagedCluster if absent and a
// CertificateSigningRequest for a key it generates, waits for the hub to
// approve and sign it, and keeps key and certificate in a directory; with
// them it renews its cluster's lease and rotates the certificate before
// it expires. The gRPC config Join returns is what the agent's other
// clients (its works, its status) connect with.
//
//	a, err := agent.New(agent.Config{ClusterName: "cluster1", AgentName: "agent1",
//		Bootstrap: grpc.Config{ServerAddress: "hub:8090", TLS: options.TLSConfig{CAFile: "ca.pem"}, TokenFile: "token"},
//		CertDir: "/var/lib/agent/tls"})
//	hubConfig, err := a.Join(ctx) // skips the bootstrap while the certificate on disk is valid
//	go a.Run(ctx)                  // lease renewal and rotation
//	works, err := work.NewClientHolderBuilder(hubConfig).WithClusterName("cluster1")...
package agent

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"
	clusterv1 "open-cluster-management.io/api/cluster/v1"

	"github.com/workwire/sdk-go/options/grpc"
	"github.com/workwire/sdk-go/registration/clients"
	"github.com/workwire/sdk-go/registration/kubeservice"
)

// CredentialsFile, in Config.CertDir, holds the agent's key and
// certificate chain, PEM, in one file, so that they are replaced together
// (as kubelet keeps its client certificate): a crash never leaves a key
// beside another key's certificate. It is both the TLS CertFile and
// KeyFile of HubConfig.
const CredentialsFile = "tls.pem"

// LeaseName is the name of the lease the hub keeps in the cluster's
// namespace for the agent to renew, as OCM's hub names it.
const LeaseName = "managed-cluster-lease"

// Defaults.
const (
	// DefaultLeaseDurationSeconds is the ManagedCluster's
	// spec.leaseDurationSeconds when the agent creates it; the agent renews
	// its lease once per that many seconds.
	DefaultLeaseDurationSeconds = 60
	// DefaultRotation is the fraction of a certificate's validity after
	// which it is rotated.
	DefaultRotation = 0.8
)

// Config configures an Agent.
type Config struct {
	// ClusterName names the cluster; a DNS label. Required.
	ClusterName string
	// AgentName names this agent among the cluster's: its certificate's
	// common name is "system:open-cluster-management:<cluster>:<agent>".
	// Required.
	AgentName string
	// Bootstrap is the hub's gRPC broker and the bootstrap identity (a
	// TokenFile or Token, or a client certificate) the agent joins with.
	Bootstrap grpc.Config
	// CertDir holds the agent's key and certificate (CredentialsFile),
	// written atomically with mode 0600. Created if absent. Required.
	CertDir string
	// LeaseDurationSeconds goes in the ManagedCluster the agent creates;
	// default DefaultLeaseDurationSeconds. The agent renews its lease at
	// the interval the hub's ManagedCluster says.
	LeaseDurationSeconds int32
	// Validity, when set, asks the signer for certificates valid that long
	// (spec.expirationSeconds; a signer may give less, never more; at least
	// ten minutes, as the Kubernetes API requires).
	Validity time.Duration
	// Rotation is the fraction of a certificate's validity after which the
	// agent asks for the next; default DefaultRotation.
	Rotation float64
	// OnCertificate, if set, is called with each certificate the agent
	// writes — its first, and each rotation's — and how long it took from
	// generating the key to writing the certificate (the hub's approval and
	// signing included).
	OnCertificate func(cert *x509.Certificate, took time.Duration)
	// Logger; default: the context's (klog.FromContext).
	Logger logr.Logger
}

// Agent registers one cluster. Join, then Run.
type Agent struct {
	cfg Config
	cn  string
	log logr.Logger
}

// New checks cfg and returns the Agent. It does no I/O.
func New(cfg Config) (*Agent, error) {
	var errs []error
	if msgs := validation.IsDNS1123Label(cfg.ClusterName); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("cluster name %q: %s", cfg.ClusterName, strings.Join(msgs, "; ")))
	}
	if cfg.AgentName == "" || strings.Contains(cfg.AgentName, ":") {
		errs = append(errs, fmt.Errorf("agent name %q: want a name without colons", cfg.AgentName))
	}
	if cfg.CertDir == "" {
		errs = append(errs, errors.New("no certificate directory"))
	}
	if cfg.Bootstrap.ServerAddress == "" {
		errs = append(errs, errors.New("no bootstrap server address"))
	}
	if cfg.Validity != 0 && cfg.Validity < 10*time.Minute {
		errs = append(errs, fmt.Errorf("validity %v: the Kubernetes API takes at least 10m", cfg.Validity))
	}
	if cfg.Rotation == 0 {
		cfg.Rotation = DefaultRotation
	}
	if cfg.Rotation <= 0 || cfg.Rotation >= 1 {
		errs = append(errs, fmt.Errorf("rotation %v: want a fraction between 0 and 1", cfg.Rotation))
	}
	if cfg.LeaseDurationSeconds == 0 {
		cfg.LeaseDurationSeconds = DefaultLeaseDurationSeconds
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("registration agent: %w", err)
	}
	return &Agent{cfg: cfg, cn: kubeservice.AgentCommonNamePrefix + cfg.ClusterName + ":" + cfg.AgentName, log: cfg.Logger}, nil
}

// HubConfig is the gRPC config of the agent's own identity: the bootstrap
// config with the agent's certificate and key in place of the bootstrap
// credentials. The files are read at each handshake, so a rotated
// certificate takes effect on the next connection.
func (a *Agent) HubConfig() *grpc.Config {
	cfg := a.cfg.Bootstrap
	cfg.Token, cfg.TokenFile, cfg.AllowTokenWithoutTLS = "", "", false
	cfg.TLS.CertFile = a.credentials()
	cfg.TLS.KeyFile = a.credentials()
	return &cfg
}

// Join returns once the agent has a valid certificate: the one in CertDir,
// or, when there is none (or it expired, or is another agent's), a new
// one through the bootstrap: it creates the ManagedCluster unless the hub
// has it, asks for a certificate, and waits — until the hub approves and
// signs, denies, or ctx ends.
func (a *Agent) Join(ctx context.Context) (*grpc.Config, error) {
	log := a.logger(ctx)
	if cert, err := a.current(); err == nil {
		log.Info("certificate on disk is valid: bootstrap skipped", "notAfter", cert.NotAfter)
		return a.HubConfig(), nil
	} else if !errors.Is(err, os.ErrNotExist) {
		log.Info("bootstrapping", "reason", err.Error())
	}
	boot, err := clients.New(&a.cfg.Bootstrap, a.cfg.ClusterName, clients.WithTypes(clients.Bootstrap), clients.WithLogger(log))
	if err != nil {
		return nil, fmt.Errorf("registration agent: %w", err)
	}
	if err := boot.Start(ctx); err != nil {
		return nil, fmt.Errorf("registration agent: bootstrap: %w", err)
	}
	defer func() { _ = boot.Close(context.WithoutCancel(ctx)) }()
	if err := a.ensureCluster(ctx, boot); err != nil {
		return nil, err
	}
	if _, err := a.certify(ctx, boot); err != nil {
		return nil, err
	}
	return a.HubConfig(), nil
}

func (a *Agent) logger(ctx context.Context) logr.Logger {
	if a.log.GetSink() != nil {
		return a.log
	}
	return klog.FromContext(ctx).WithValues("cluster", a.cfg.ClusterName)
}

// ensureCluster creates the ManagedCluster unless the hub has it.
func (a *Agent) ensureCluster(ctx context.Context, c *clients.Clients) error {
	clusters := c.ClusterClient().ClusterV1().ManagedClusters()
	_, err := clusters.Get(ctx, a.cfg.ClusterName, metav1.GetOptions{})
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("registration agent: get cluster: %w", err)
	}
	_, err = clusters.Create(ctx, &clusterv1.ManagedCluster{
		ObjectMeta: metav1.ObjectMeta{Name: a.cfg.ClusterName},
		Spec:       clusterv1.ManagedClusterSpec{LeaseDurationSeconds: a.cfg.LeaseDurationSeconds},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("registration agent: create cluster: %w", err)
	}
	a.logger(ctx).Info("cluster created on the hub")
	return nil
}

// current returns the certificate in CertDir if it is valid now, with its
// key, and this agent's.
func (a *Agent) current() (*x509.Certificate, error) {
	pair, err := tls.LoadX509KeyPair(a.credentials(), a.credentials())
	if err != nil {
		return nil, err
	}
	cert := pair.Leaf
	if cert == nil {
		if cert, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, err
		}
	}
	now := time.Now()
	switch {
	case cert.Subject.CommonName != a.cn:
		return nil, fmt.Errorf("the certificate on disk is %q's, not %q's", cert.Subject.CommonName, a.cn)
	case now.Before(cert.NotBefore), !now.Before(cert.NotAfter):
		return nil, fmt.Errorf("the certificate on disk is valid from %v to %v, not now", cert.NotBefore, cert.NotAfter)
	}
	return cert, nil
}

// certify asks for a certificate of a new key through c, waits for it, and
// writes both to CertDir.
func (a *Agent) certify(ctx context.Context, c *clients.Clients) (*x509.Certificate, error) {
	log := a.logger(ctx)
	began := time.Now()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("registration agent: key: %w", err)
	}
	request, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{
		CommonName:   a.cn,
		Organization: []string{kubeservice.AgentCommonNamePrefix + a.cfg.ClusterName, kubeservice.ManagedClustersGroup},
	}}, key)
	if err != nil {
		return nil, fmt.Errorf("registration agent: certificate request: %w", err)
	}
	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{
			Name:   a.cfg.ClusterName + "-" + utilrand.String(5),
			Labels: map[string]string{kubeservice.ClusterNameLabel: a.cfg.ClusterName},
		},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: request}),
			SignerName: kubeservice.GRPCSigner,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth},
		},
	}
	if a.cfg.Validity > 0 {
		seconds := int32(a.cfg.Validity / time.Second)
		csr.Spec.ExpirationSeconds = &seconds
	}
	csrs := c.KubeClient().CertificatesV1().CertificateSigningRequests()
	if _, err := csrs.Create(ctx, csr, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("registration agent: create CSR: %w", err)
	}
	log.Info("certificate requested", "csr", csr.Name)
	der, err := waitForCertificate(ctx, c, csr.Name, key.Public())
	if err != nil {
		return nil, fmt.Errorf("registration agent: CSR %s: %w", csr.Name, err)
	}
	cert := der[0]
	if err := a.write(key, der); err != nil {
		return nil, fmt.Errorf("registration agent: %w", err)
	}
	took := time.Since(began)
	log.Info("certificate written", "csr", csr.Name, "notAfter", cert.NotAfter, "took", took)
	if a.cfg.OnCertificate != nil {
		a.cfg.OnCertificate(cert, took)
	}
	return cert, nil
}

// waitForCertificate waits until the hub issued the certificate of CSR
// name (for key), or denied it, or failed it.
func waitForCertificate(ctx context.Context, c *clients.Clients, name string, key crypto.PublicKey) ([]*x509.Certificate, error) {
	csrs := c.KubeClient().CertificatesV1().CertificateSigningRequests()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		csr, err := csrs.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			// Not here yet.
		case err != nil:
			return nil, err
		default:
			for _, cond := range csr.Status.Conditions {
				if (cond.Type == certificatesv1.CertificateDenied || cond.Type == certificatesv1.CertificateFailed) && cond.Status == "True" {
					return nil, fmt.Errorf("%s by the hub: %s: %s", strings.ToLower(string(cond.Type)), cond.Reason, cond.Message)
				}
			}
			if len(csr.Status.Certificate) > 0 {
				return parseIssued(csr.Status.Certificate, key)
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for its certificate: %w", context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// parseIssued parses the PEM chain the signer issued and checks it is for
// key.
func parseIssued(data []byte, key crypto.PublicKey) ([]*x509.Certificate, error) {
	var chain []*x509.Certificate
	for block, rest := pem.Decode(data); block != nil; block, rest = pem.Decode(rest) {
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("issued certificate: %w", err)
		}
		chain = append(chain, cert)
	}
	if len(chain) == 0 {
		return nil, errors.New("the issued certificate is not PEM")
	}
	if pub, ok := chain[0].PublicKey.(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(key) {
		return nil, errors.New("the issued certificate is not for the key the agent asked with")
	}
	return chain, nil
}

// credentials is the path of CredentialsFile.
func (a *Agent) credentials() string { return filepath.Join(a.cfg.CertDir, CredentialsFile) }

// write replaces the key and certificate in CertDir, together: one file,
// written to a temporary one (mode 0600), synced, and renamed over the old.
func (a *Agent) write(key *ecdsa.PrivateKey, chain []*x509.Certificate) error {
	if err := os.MkdirAll(a.cfg.CertDir, 0o700); err != nil {
		return err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	data := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	for _, c := range chain {
		data = append(data, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	return writeAtomic(a.credentials(), data)
}

func writeAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() { _ = os.Remove(tmp) }() // gone after the rename
	if err := f.Chmod(0o600); err != nil {
		_ = f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Run keeps the joined agent registered until ctx ends: it renews its
// cluster's lease once per the cluster's spec.leaseDurationSeconds while
// the hub keeps one for it (the hub creates it once it accepts the
// cluster), and rotates the certificate once Rotation of its validity has
// passed, trying again until it expires. It connects with HubConfig; call
// Join first. It returns ctx's cause, or the error that stopped it: a
// certificate that expired before it could be rotated means the agent must
// Join again, with its bootstrap identity.
func (a *Agent) Run(ctx context.Context) error {
	log := a.logger(ctx)
	cert, err := a.current()
	if err != nil {
		return fmt.Errorf("registration agent: not joined: %w", err)
	}
	c, err := clients.New(a.HubConfig(), a.cfg.ClusterName,
		clients.WithTypes(clients.ManagedClusters|clients.CertificateSigningRequests|clients.Leases), clients.WithLogger(log))
	if err != nil {
		return fmt.Errorf("registration agent: %w", err)
	}
	if err := c.Start(ctx); err != nil {
		return fmt.Errorf("registration agent: %w", err)
	}
	defer func() { _ = c.Close(context.WithoutCancel(ctx)) }()

	// Rotation runs beside the renewals: waiting for the hub to sign the
	// next certificate must not hold up the lease.
	rctx, stop := context.WithCancel(ctx)
	rotated := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() { rotated <- a.rotate(rctx, c, cert) })
	defer wg.Wait()
	defer stop()
	renew := time.NewTimer(0)
	defer renew.Stop()
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case err := <-rotated:
			return err
		case <-renew.C:
			if err := a.renewLease(ctx, c); err != nil {
				log.Error(err, "lease not renewed")
			}
			renew.Reset(a.leaseInterval(ctx, c))
		}
	}
}

// rotate asks for the next certificate each time Rotation of the current
// one's validity has passed, and tries again until the current one
// expires; then it gives up with an error. It returns ctx's cause when ctx
// ends.
func (a *Agent) rotate(ctx context.Context, c *clients.Clients, cert *x509.Certificate) error {
	log := a.logger(ctx)
	timer := time.NewTimer(time.Until(a.rotationTime(cert)))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-timer.C:
		}
		// A request the hub has not signed when the certificate expires is
		// one it will not sign in time.
		certCtx, cancel := context.WithDeadline(ctx, cert.NotAfter)
		next, err := a.certify(certCtx, c)
		cancel()
		switch {
		case err == nil:
			cert = next
			timer.Reset(time.Until(a.rotationTime(cert)))
		case ctx.Err() != nil:
			return context.Cause(ctx)
		case !time.Now().Before(cert.NotAfter):
			return fmt.Errorf("registration agent: the certificate expired before it could be rotated (Join again): %w", err)
		default:
			log.Error(err, "certificate not rotated; trying again")
			timer.Reset(max(time.Until(cert.NotAfter)/10, time.Second))
		}
	}
}

// rotationTime is when Rotation of cert's validity has passed, counted
// from when the agent wrote it if later than its NotBefore (signers
// backdate certificates for clocks that differ: a short one would be due
// at once).
func (a *Agent) rotationTime(cert *x509.Certificate) time.Time {
	start := cert.NotBefore
	if info, err := os.Stat(a.credentials()); err == nil && info.ModTime().After(start) {
		start = info.ModTime()
	}
	return start.Add(time.Duration(float64(cert.NotAfter.Sub(start)) * a.cfg.Rotation))
}

// leaseInterval is the hub's ManagedCluster's spec.leaseDurationSeconds.
func (a *Agent) leaseInterval(ctx context.Context, c *clients.Clients) time.Duration {
	seconds := a.cfg.LeaseDurationSeconds
	if cluster, err := c.ClusterClient().ClusterV1().ManagedClusters().Get(ctx, a.cfg.ClusterName, metav1.GetOptions{}); err == nil && cluster.Spec.LeaseDurationSeconds > 0 {
		seconds = cluster.Spec.LeaseDurationSeconds
	}
	return time.Duration(seconds) * time.Second
}

// renewLease renews the cluster's lease if the hub keeps one.
func (a *Agent) renewLease(ctx context.Context, c *clients.Clients) error {
	leases := c.KubeClient().CoordinationV1().Leases(a.cfg.ClusterName)
	lease, err := leases.Get(ctx, LeaseName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil // the hub has not accepted the cluster yet
	}
	if err != nil {
		return err
	}
	renewed := lease.DeepCopy()
	now := metav1.NewMicroTime(time.Now())
	renewed.Spec.RenewTime = &now
	if _, err := leases.Update(ctx, renewed, metav1.UpdateOptions{}); err != nil {
		return err
	}
	a.logger(ctx).V(4).Info("lease renewed")
	return nil
}
