package interop

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clusterclient "open-cluster-management.io/api/client/cluster/clientset/versioned"
	workclient "open-cluster-management.io/api/client/work/clientset/versioned"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/internal/testsupport/kubetest"
	"github.com/workwire/sdk-go/internal/testsupport/proctest"
	"github.com/workwire/sdk-go/internal/testsupport/testcerts"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc"
	"github.com/workwire/sdk-go/options/grpc/server"
	registrationagent "github.com/workwire/sdk-go/registration/agent"
	"github.com/workwire/sdk-go/registration/kubeservice"
	"github.com/workwire/sdk-go/registration/signer"
	"github.com/workwire/sdk-go/work"
)

// workwire's agents join OCM's hub, of each release: registration/agent and a work
// agent holder against OCM's `server grpc`, run as a process over a real
// kube-apiserver. The registration agent joins with a service account's
// token (OCM's server checks it by TokenReview, and every request by
// SubjectAccessReview against the RBAC the test grants as OCM's hub does),
// its CSR is approved and signed by workwire's signer over the hub's
// kube-apiserver (OCM's server signs nothing: its hub controller does,
// which this test does not run), it renews its lease with its certificate,
// and the work agent, connected with that certificate, takes a ManifestWork
// the hub writes and reports it Applied to the hub's kube-apiserver.
func TestWorkwireAgentsJoinOCMsHub(t *testing.T) { forEachOCMRelease(t, testWorkwireAgentsJoinOCMsHub) }

func testWorkwireAgentsJoinOCMsHub(t *testing.T, release ocmRelease) {
	bin := release.program(t, "server")
	cfg := kubetest.Start(t)
	kubetest.InstallOCMCRDs(t, cfg)
	const cluster, agentName = "cluster1", "agent1"
	kubetest.CreateNamespaces(t, cfg, cluster, "open-cluster-management-hub")
	kube := kubernetes.NewForConfigOrDie(cfg)
	clusters := clusterclient.NewForConfigOrDie(cfg)
	works := workclient.NewForConfigOrDie(cfg)
	ctx := context.Background()

	// The hub's RBAC, as OCM grants it: the bootstrap service account may
	// create and watch its cluster and CSRs; the cluster's agents, in the
	// cluster's namespace, what they carry.
	bootstrapToken := grantAsOCMHub(t, kube, cluster)

	// OCM's hub gRPC server, with TLS and the CA whose certificates it
	// takes from agents.
	ca := testcerts.NewCA(t)
	serving := ca.Server(t, "hub")
	port := freePort(t)
	serverConfig := yamlFile(t, "server.yaml",
		"tls_cert_file: "+serving.CertFile, "tls_key_file: "+serving.KeyFile, "client_ca_file: "+ca.CAFile(),
		"server_bind_port: \""+port+"\"")
	if _, err := server.LoadConfig(serverConfig); err != nil {
		t.Errorf("workwire's server does not load the file OCM's runs with: %v", err)
	}
	ocm := startProgram(t, "ocm-grpc-server", bin, nil, append([]string{
		"grpc", "--server-config=" + serverConfig,
		"--kubeconfig=" + kubetest.Kubeconfig(t, cfg),
		"--namespace=open-cluster-management-hub", "--listen=" + freeListen(t)},
		ifListed(t, bin, "grpc", "--disable-leader-election")...)...)
	procs := []*proctest.Process{ocm}
	addr := net.JoinHostPort("127.0.0.1", port)
	waitFor(t, "OCM's gRPC server listening", time.Minute, procs, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})

	// workwire's signer stands in for OCM's hub controller: it approves the
	// bootstrap identity's CSR, and the agent's renewals, and signs them
	// with the CA OCM's server trusts.
	kubeInf := informers.NewSharedInformerFactory(kube, 0)
	sign, err := signer.New(kube, kubeInf.Certificates().V1().CertificateSigningRequests(), ca.CertPEM, ca.KeyPEM(t),
		signer.WithValidity(time.Hour), signer.WithAutoApprove("system:serviceaccount:"+cluster+":bootstrap"), signer.WithApproveRenewals())
	if err != nil {
		t.Fatal(err)
	}
	signCtx, stopSigner := context.WithCancel(ctx)
	kubeInf.Start(signCtx.Done())
	signed := make(chan struct{})
	go func() { defer close(signed); sign.Run(signCtx) }()
	t.Cleanup(func() { stopSigner(); <-signed; kubeInf.Shutdown() })

	// The agent joins.
	began := time.Now()
	tokenFile := writeFile(t, "bootstrap.token", bootstrapToken)
	a, err := registrationagent.New(registrationagent.Config{ClusterName: cluster, AgentName: agentName, CertDir: t.TempDir(), LeaseDurationSeconds: 5,
		Bootstrap: grpc.Config{ServerAddress: addr, TLS: options.TLSConfig{CAFile: ca.CAFile()}, TokenFile: tokenFile},
		Logger:    logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	joinCtx, cancelJoin := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelJoin()
	accepted := make(chan struct{})
	go func() {
		// The hub accepts the cluster once it exists, as its admin would.
		defer close(accepted)
		for joinCtx.Err() == nil {
			if _, err := clusters.ClusterV1().ManagedClusters().Get(ctx, cluster, metav1.GetOptions{}); err == nil {
				acceptCluster(t, clusters, kube, cluster)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	hubConfig, err := a.Join(joinCtx)
	if err != nil {
		t.Fatalf("join OCM's hub: %v\n%s", err, ocm.Tail(30))
	}
	joined := time.Since(began)
	<-accepted
	cert, err := readCertificate(hubConfig.TLS.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	if want := kubeservice.AgentCommonNamePrefix + cluster + ":" + agentName; cert.Subject.CommonName != want {
		t.Errorf("the agent's certificate is of %q, want %q", cert.Subject.CommonName, want)
	}
	runCtx, stopAgent := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- a.Run(runCtx) }()
	t.Cleanup(func() {
		stopAgent()
		if err := <-ran; err != nil && runCtx.Err() == nil {
			t.Errorf("run: %v", err)
		}
	})
	renewedAt := leaseRenewTime(t, kube, cluster)
	waitFor(t, "the lease renewed by workwire's agent", time.Minute, procs, func() bool { return leaseRenewTime(t, kube, cluster).After(renewedAt) })

	// Works: a workwire work agent with the agent's certificate.
	wa := startWWAgent(t, work.NewClientHolderBuilder(hubConfig).WithClusterName(cluster).WithLogger(logr.Discard()), cluster)
	created := time.Now()
	w, err := works.WorkV1().ManifestWorks(cluster).Create(ctx, newWork(1, "v1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the work Applied on OCM's hub", time.Minute, procs, func() bool {
		got, err := works.WorkV1().ManifestWorks(cluster).Get(ctx, w.Name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		c := meta.FindStatusCondition(got.Status.Conditions, workv1.WorkApplied)
		return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == got.Generation
	})
	firstApplied := time.Since(created)
	if err := works.WorkV1().ManifestWorks(cluster).Delete(ctx, w.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the work deleted after the agent's Deleted", time.Minute, procs, func() bool {
		_, err := works.WorkV1().ManifestWorks(cluster).Get(ctx, w.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err) && len(wa.holds()) == 0
	})
	t.Logf("workwire's agents on OCM %s's hub: joined after %s, first work Applied after %s",
		release.name, joined.Round(100*time.Millisecond), firstApplied.Round(10*time.Millisecond))
}

// grantAsOCMHub gives the hub's kube-apiserver what OCM's hub gives a
// cluster: a bootstrap service account (its token returned) that may
// create and watch its ManagedCluster and CSRs, and for the cluster's
// agents — the group its certificates name — what they carry, in the
// cluster's namespace, which is where OCM's server asks about each request.
func grantAsOCMHub(t *testing.T, kube kubernetes.Interface, cluster string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := kube.CoreV1().ServiceAccounts(cluster).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "bootstrap"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	roles := map[string][]rbacv1.PolicyRule{
		"bootstrap": {
			{APIGroups: []string{"cluster.open-cluster-management.io"}, Resources: []string{"managedclusters"}, Verbs: []string{"create", "get", "list", "watch"}},
			{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"create", "get", "list", "watch"}},
		},
		"agent": {
			{APIGroups: []string{"cluster.open-cluster-management.io"}, Resources: []string{"managedclusters", "managedclusters/status"}, Verbs: []string{"create", "get", "list", "watch", "update"}},
			{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"create", "get", "list", "watch"}},
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch", "update"}},
			{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "update", "patch"}},
			{APIGroups: []string{"addon.open-cluster-management.io"}, Resources: []string{"managedclusteraddons", "managedclusteraddons/status"}, Verbs: []string{"get", "list", "watch", "update"}},
			{APIGroups: []string{"work.open-cluster-management.io"}, Resources: []string{"manifestworks", "manifestworks/status"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
		},
	}
	subjects := map[string]rbacv1.Subject{
		"bootstrap": {Kind: rbacv1.ServiceAccountKind, Name: "bootstrap", Namespace: cluster},
		"agent":     {Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: kubeservice.AgentCommonNamePrefix + cluster},
	}
	for name, rules := range roles {
		if _, err := kube.RbacV1().Roles(cluster).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := kube.RbacV1().RoleBindings(cluster).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects: []rbacv1.Subject{subjects[name]}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	expiry := int64(3600)
	tr, err := kube.CoreV1().ServiceAccounts(cluster).CreateToken(ctx, "bootstrap",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// freePort returns a port the OS just chose on loopback (OCM's server
// listens on every interface at the port its config names).
func freePort(t *testing.T) string {
	t.Helper()
	_, port, err := net.SplitHostPort(freeListen(t))
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// readCertificate reads the certificate of a file holding a key and its
// certificate, as registration/agent keeps them.
func readCertificate(path string) (*x509.Certificate, error) {
	pair, err := tls.LoadX509KeyPair(path, path)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(pair.Certificate[0])
}
