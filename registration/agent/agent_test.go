package agent_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	addonclient "open-cluster-management.io/api/client/addon/clientset/versioned"
	clusterclient "open-cluster-management.io/api/client/cluster/clientset/versioned"

	"github.com/workwire/sdk-go/internal/testsupport/kubefake"
	"github.com/workwire/sdk-go/internal/testsupport/kubetest"
	"github.com/workwire/sdk-go/internal/testsupport/testcerts"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc"
	"github.com/workwire/sdk-go/options/grpc/grpctest"
	"github.com/workwire/sdk-go/options/grpc/server"
	"github.com/workwire/sdk-go/registration/agent"
	"github.com/workwire/sdk-go/registration/hub"
	"github.com/workwire/sdk-go/registration/signer"
)

const (
	bootstrapUser  = "system:bootstrap:abc123"
	bootstrapToken = "abc123.secret"
)

// Every goroutine an agent starts stops when its context ends and Run
// returns.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testHub is a hub — its kube-apiserver, the registration Services and
// signer, a gRPC broker with mutual TLS — for agents to join.
type testHub struct {
	kube     kubernetes.Interface
	clusters clusterclient.Interface
	broker   *grpctest.Server
	ca       *testcerts.CA
	token    string // the bootstrap token's file
}

type hubOptions struct {
	validity    time.Duration
	autoApprove bool
	noRenewals  bool // the signer leaves renewals to another approver (none here)
}

func forEachHub(t *testing.T, o hubOptions, test func(t *testing.T, h *testHub)) {
	t.Run("stand-in", func(t *testing.T) {
		f := kubefake.NewHub()
		test(t, startHub(t, f.Kube, f.Cluster, f.AddOn, o))
	})
	t.Run("kube-apiserver", func(t *testing.T) {
		cfg := kubetest.Start(t)
		kubetest.InstallOCMCRDs(t, cfg)
		kubetest.CreateNamespaces(t, cfg, "cluster1")
		test(t, startHub(t, kubernetes.NewForConfigOrDie(cfg), clusterclient.NewForConfigOrDie(cfg), addonclient.NewForConfigOrDie(cfg), o))
	})
}

func startHub(t *testing.T, kube kubernetes.Interface, clusters clusterclient.Interface, addons addonclient.Interface, o hubOptions) *testHub {
	t.Helper()
	ca := testcerts.NewCA(t)
	var opts []signer.Option
	if o.validity != 0 {
		opts = append(opts, signer.WithValidity(o.validity))
	}
	if !o.noRenewals {
		opts = append(opts, signer.WithApproveRenewals())
	}
	if o.autoApprove {
		opts = append(opts, signer.WithAutoApprove(bootstrapUser))
	}
	h, err := hub.New(hub.Config{Kube: kube, Cluster: clusters, AddOn: addons, CACert: ca.CertPEM, CAKey: ca.KeyPEM(t), SignerOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	cert := ca.Server(t, "hub")
	broker := grpctest.NewServerWithConfig(t, server.Config{TLS: server.TLSConfig{CertFile: cert.CertFile, KeyFile: cert.KeyFile, ClientCAFile: ca.CAFile()}},
		append(h.ServerOptions(),
			server.WithAuthenticator(server.AnyAuthenticator(
				server.StaticAuthenticator{Tokens: map[string]server.Identity{bootstrapToken: {User: bootstrapUser, Groups: []string{"system:bootstrappers"}}}},
				server.CertificateAuthenticator{})),
			server.WithAuthorizer(hub.Authorizer{Bootstrap: []string{"group:system:bootstrappers"}}))...)
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte(bootstrapToken), 0o600); err != nil {
		t.Fatal(err)
	}
	return &testHub{kube: kube, clusters: clusters, broker: broker, ca: ca, token: token}
}

// config is cluster1's agent's, keeping its certificate in dir.
func (h *testHub) config(dir string) agent.Config {
	boot := h.broker.Config()
	boot.TLS = options.TLSConfig{CAFile: h.ca.CAFile()}
	boot.TokenFile = h.token
	return agent.Config{ClusterName: "cluster1", AgentName: "agent1", Bootstrap: boot, CertDir: dir, LeaseDurationSeconds: 1, Logger: logr.Discard()}
}

func (h *testHub) csrCount(t *testing.T) int {
	t.Helper()
	l, err := h.kube.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return len(l.Items)
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// certificates records what OnCertificate is called with.
type certificates struct {
	mu    sync.Mutex
	certs []*x509.Certificate
}

func (c *certificates) add(cert *x509.Certificate, _ time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.certs = append(c.certs, cert)
}

func (c *certificates) get() []*x509.Certificate {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*x509.Certificate(nil), c.certs...)
}

// An agent joins with a bootstrap token: its ManagedCluster is created, its
// CSR approved and signed, key and certificate written with mode 0600; it
// renews the lease the hub keeps once it accepted the cluster; it rotates
// its short-lived certificate before it expires and, once the first has
// expired (and the broker ended its connections), goes on renewing with
// the new one.
func TestAnAgentJoinsRenewsItsLeaseAndRotates(t *testing.T) {
	forEachHub(t, hubOptions{validity: 10 * time.Second, autoApprove: true}, func(t *testing.T, h *testHub) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		dir := filepath.Join(t.TempDir(), "tls")
		cfg := h.config(dir)
		cfg.Rotation = 0.5
		var got certificates
		cfg.OnCertificate = got.add
		a, err := agent.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		hubConfig, err := a.Join(ctx)
		if err != nil {
			t.Fatalf("join: %v", err)
		}
		if hubConfig.TokenFile != "" || hubConfig.TLS.CertFile != filepath.Join(dir, agent.CredentialsFile) || hubConfig.TLS.KeyFile != hubConfig.TLS.CertFile {
			t.Errorf("the hub config still has the bootstrap identity or not the agent's: %+v", hubConfig)
		}
		for _, f := range []string{agent.CredentialsFile} {
			info, err := os.Stat(filepath.Join(dir, f))
			if err != nil || info.Mode().Perm() != 0o600 {
				t.Errorf("%s: %v, %v, want mode 0600", f, info, err)
			}
		}
		first := got.get()
		if len(first) != 1 || first[0].Subject.CommonName != "system:open-cluster-management:cluster1:agent1" {
			t.Fatalf("certificates written: %v", first)
		}
		if _, err := h.clusters.ClusterV1().ManagedClusters().Get(ctx, "cluster1", metav1.GetOptions{}); err != nil {
			t.Errorf("the cluster on the hub: %v", err)
		}

		// The hub accepts the cluster: it keeps a lease for it.
		if _, err := h.kube.CoordinationV1().Leases("cluster1").Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: agent.LeaseName, Namespace: "cluster1"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		renewedAfter := func(at time.Time) func() bool {
			return func() bool {
				l, err := h.kube.CoordinationV1().Leases("cluster1").Get(ctx, agent.LeaseName, metav1.GetOptions{})
				return err == nil && l.Spec.RenewTime != nil && l.Spec.RenewTime.After(at)
			}
		}
		eventually(t, "a renewal", renewedAfter(time.Time{}))
		eventually(t, "a rotation", func() bool { return len(got.get()) >= 2 })
		rotated := got.get()[1]
		if rotated.SerialNumber.Cmp(first[0].SerialNumber) == 0 {
			t.Fatal("the rotation wrote the same certificate")
		}
		onDisk, err := os.ReadFile(filepath.Join(dir, agent.CredentialsFile))
		if err != nil {
			t.Fatal(err)
		}
		if pair, err := tls.X509KeyPair(onDisk, onDisk); err != nil || string(pair.Certificate[0]) != string(rotated.Raw) {
			// A further rotation may have happened since: it is newer still.
			if len(got.get()) == 2 {
				t.Error("the rotated certificate is not on disk")
			}
		}
		eventually(t, "a renewal after the first certificate expired", renewedAfter(first[0].NotAfter.Add(time.Second)))
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("Run: %v, want context.Canceled", err)
		}
	})
}

// A restart with a valid certificate on disk skips the bootstrap: with a
// bootstrap token the hub no longer knows, it joins, and asks for nothing.
func TestARestartWithAValidCertificateSkipsTheBootstrap(t *testing.T) {
	f := kubefake.NewHub()
	h := startHub(t, f.Kube, f.Cluster, f.AddOn, hubOptions{autoApprove: true})
	ctx := context.Background()
	dir := t.TempDir()
	a, err := agent.New(h.config(dir))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Join(ctx); err != nil {
		t.Fatal(err)
	}
	csrs := h.csrCount(t)
	cfg := h.config(dir)
	cfg.Bootstrap.TokenFile = ""
	cfg.Bootstrap.Token = "revoked"
	restarted, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	joinCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := restarted.Join(joinCtx); err != nil {
		t.Fatalf("a restart: %v", err)
	}
	if n := h.csrCount(t); n != csrs {
		t.Errorf("CSRs: %d after the restart, %d before", n, csrs)
	}

	// Another agent's certificate in the directory is not this one's.
	other := h.config(dir)
	other.AgentName = "agent2"
	o, err := agent.New(other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Join(ctx); err != nil {
		t.Fatal(err)
	}
	if n := h.csrCount(t); n != csrs+1 {
		t.Errorf("CSRs: %d after another agent joined, want %d", n, csrs+1)
	}
}

// A request the hub denies ends the join with the hub's reason.
func TestADeniedRequestEndsTheJoin(t *testing.T) {
	f := kubefake.NewHub()
	h := startHub(t, f.Kube, f.Cluster, f.AddOn, hubOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			l, err := h.kube.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
			if err == nil && len(l.Items) > 0 {
				csr := l.Items[0].DeepCopy()
				csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
					Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue, Reason: "UnknownCluster", Message: "nobody expects cluster1"})
				if _, err := h.kube.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{}); err == nil {
					return
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	a, err := agent.New(h.config(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Join(ctx)
	if err == nil || !strings.Contains(err.Error(), "denied by the hub: UnknownCluster: nobody expects cluster1") {
		t.Errorf("join: %v, want the hub's denial", err)
	}
}

func TestNewRefusesABadConfig(t *testing.T) {
	_, err := agent.New(agent.Config{ClusterName: "Cluster_1", AgentName: "a:b", Bootstrap: grpc.Config{}, Validity: time.Minute, Rotation: 1.5})
	if err == nil {
		t.Fatal("a bad config was accepted")
	}
	for _, want := range []string{`cluster name "Cluster_1"`, `agent name "a:b"`, "no certificate directory", "no bootstrap server address", "validity 1m0s", "rotation 1.5"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v: does not say %q", err, want)
		}
	}
}

// While the hub does not sign the next certificate, the agent goes on
// renewing its lease; once its certificate expired unrotated, Run says so.
func TestAnUnrotatedCertificateStopsRunButNotTheLeaseBefore(t *testing.T) {
	f := kubefake.NewHub()
	h := startHub(t, f.Kube, f.Cluster, f.AddOn, hubOptions{validity: 6 * time.Second, autoApprove: true, noRenewals: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := h.config(t.TempDir())
	cfg.Rotation = 0.3
	a, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Join(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := h.kube.CoordinationV1().Leases("cluster1").Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: agent.LeaseName, Namespace: "cluster1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	// Rotation is due after about 2 s of the 6; renewals go on past it.
	eventually(t, "a renewal while the rotation waits", func() bool {
		l, err := h.kube.CoordinationV1().Leases("cluster1").Get(ctx, agent.LeaseName, metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime != nil && l.Spec.RenewTime.After(began.Add(3*time.Second))
	})
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "expired before it could be rotated") {
			t.Errorf("Run: %v, want it to say the certificate expired unrotated", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run went on with an expired certificate")
	}
	if n := h.csrCount(t); n < 2 {
		t.Errorf("%d CSRs: the agent never asked for the next certificate", n)
	}
}
