package interop

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clusterclient "open-cluster-management.io/api/client/cluster/clientset/versioned"
	clusterv1 "open-cluster-management.io/api/cluster/v1"

	"github.com/workwire/sdk-go/internal/testsupport/kubetest"
	"github.com/workwire/sdk-go/internal/testsupport/proctest"
	"github.com/workwire/sdk-go/internal/testsupport/testcerts"
	"github.com/workwire/sdk-go/registration/kubeservice"
)

// OCM's klusterlet, of each release, joins a hub through the workwire program
// (`workwire broker`, cmd/workwire) as an operator runs it: kube Services
// with registration over a real kube-apiserver, TLS, the agents' CSRs
// signed with the CA its flags name, bootstrap by a service account token
// the kube-apiserver reviews. The cluster becomes Joined and Available
// and renews its lease; the broker's logs name the agent's subscriptions,
// and SIGTERM ends it with exit status 0.
func TestOCMKlusterletJoinsThroughTheWorkwireProgram(t *testing.T) {
	forEachOCMRelease(t, testOCMKlusterletJoinsThroughTheWorkwireProgram)
}

func testOCMKlusterletJoinsThroughTheWorkwireProgram(t *testing.T, ocm ocmRelease) {
	bin := ocm.program(t, "registration")
	cfg := kubetest.Start(t)
	kubetest.InstallOCMCRDs(t, cfg)
	kubetest.InstallCRDs(t, cfg, kubetest.ModuleFile(t, kubetest.OCMAPIModule, "cluster/v1alpha1/0000_02_clusters.open-cluster-management.io_clusterclaims.crd.yaml"))
	const cluster, agentID, bootstrapNamespace = "cluster1", "agent1", "workwire-bootstrap"
	kubetest.CreateNamespaces(t, cfg, cluster, agentNamespace, addonNamespace, bootstrapNamespace)
	kube := kubernetes.NewForConfigOrDie(cfg)
	clusters := clusterclient.NewForConfigOrDie(cfg)
	ctx := context.Background()

	// The bootstrap identity: a service account whose group the broker
	// lets join, and its token.
	if _, err := kube.CoreV1().ServiceAccounts(bootstrapNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: cluster}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := kube.CoreV1().ServiceAccounts(bootstrapNamespace).CreateToken(ctx, cluster, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	ca := testcerts.NewCA(t)
	serving := ca.Server(t, "hub")
	dir := t.TempDir()
	signerKey := filepath.Join(dir, "signer.key")
	if err := os.WriteFile(signerKey, ca.KeyPEM(t), 0o600); err != nil {
		t.Fatal(err)
	}
	broker := startWorkwireBroker(t, dir,
		[]string{"listenAddress: 127.0.0.1:0", "tls:", "  certFile: " + serving.CertFile, "  keyFile: " + serving.KeyFile, "  clientCAFile: " + ca.CAFile()},
		"-services", "kube", "-kubeconfig", kubetest.Kubeconfig(t, cfg),
		"-signer-ca-cert", ca.CAFile(), "-signer-ca-key", signerKey, "-signer-validity", "24h",
		"-bootstrap-groups", "system:serviceaccounts:"+bootstrapNamespace)

	hubDir := t.TempDir()
	agent := startProgram(t, "registration-agent", bin, nil, append([]string{
		"agent", "--registration-auth=grpc",
		"--spoke-cluster-name=" + cluster, "--agent-id=" + agentID,
		"--kubeconfig=" + kubetest.Kubeconfig(t, cfg),
		"--bootstrap-kubeconfig=" + kubetest.Kubeconfig(t, cfg),
		"--grpc-bootstrap-config=" + yamlFile(t, "bootstrap.yaml", "url: "+broker.addr, "caFile: "+ca.CAFile(), "token: "+tr.Status.Token),
		"--hub-kubeconfig-dir=" + hubDir, "--grpc-config=" + hubDir + "/config.yaml",
		"--cluster-healthcheck-period=5s",
		"--namespace=" + agentNamespace, "--listen=" + freeListen(t)},
		ifListed(t, bin, "agent", "--disable-leader-election")...)...)
	procs := []*proctest.Process{agent, broker.Process}

	waitFor(t, "the ManagedCluster", time.Minute, procs, func() bool {
		_, err := clusters.ClusterV1().ManagedClusters().Get(ctx, cluster, metav1.GetOptions{})
		return err == nil
	})
	var csr *certificatesv1.CertificateSigningRequest
	waitFor(t, "the agent's CSR", time.Minute, procs, func() bool {
		csr = clusterCSR(t, kube, cluster, func(c *certificatesv1.CertificateSigningRequest) bool {
			return c.Labels[kubeservice.AddOnNameLabel] == ""
		})
		return csr != nil
	})
	if want := "system:serviceaccount:" + bootstrapNamespace + ":" + cluster; csr.Annotations[kubeservice.CSRUserAnnotation] != want {
		t.Errorf("the CSR was created for %q, want the bootstrap token's %q", csr.Annotations[kubeservice.CSRUserAnnotation], want)
	}
	approve(t, kube, csr)
	waitFor(t, "the hub credentials on the managed cluster", time.Minute, procs, func() bool {
		return secretCert(t, kube, agentNamespace, hubSecret) != nil
	})
	acceptCluster(t, clusters, kube, cluster)
	waitFor(t, "the cluster Joined and Available", 2*time.Minute, procs, func() bool {
		c, err := clusters.ClusterV1().ManagedClusters().Get(ctx, cluster, metav1.GetOptions{})
		return err == nil && meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1.ManagedClusterConditionJoined) &&
			meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1.ManagedClusterConditionAvailable)
	})
	renewedAt := leaseRenewTime(t, kube, cluster)
	waitFor(t, "the lease renewed", time.Minute, procs, func() bool { return leaseRenewTime(t, kube, cluster).After(renewedAt) })

	user := kubeservice.AgentCommonNamePrefix + cluster + ":" + agentID
	if n := strings.Count(broker.Output(), `"msg":"subscribed"`); n == 0 || !strings.Contains(broker.Output(), `"user":"`+user+`"`) {
		t.Errorf("the broker's log names no subscription of %s (%d subscriptions):\n%s", user, n, broker.Tail(20))
	}
	if err := broker.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if st := broker.Wait(time.Minute); st == nil || st.ExitCode() != 0 {
		t.Errorf("the broker after SIGTERM: %v:\n%s", st, broker.Tail(20))
	}
}

// workwireBroker is `workwire broker` running for a test.
type workwireBroker struct {
	*proctest.Process
	addr string
}

// startWorkwireBroker builds the workwire program, runs `workwire broker`
// with a config file of these lines and args, and returns once it is
// ready.
func startWorkwireBroker(t *testing.T, dir string, config []string, args ...string) *workwireBroker {
	t.Helper()
	bin := filepath.Join(dir, "workwire")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = filepath.Join("..", "..", "..", "cmd", "workwire")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build workwire: %v\n%s", err, out)
	}
	cfgFile := yamlFile(t, "broker.yaml", config...)
	admin := freeListen(t)
	p := proctest.Start(t, "workwire-broker", bin, nil, append([]string{"broker", "-config", cfgFile, "-admin-address", admin, "-log-format", "json"}, args...)...)
	b := &workwireBroker{Process: p}
	waitFor(t, "the workwire broker ready", 2*time.Minute, []*proctest.Process{p}, func() bool {
		if b.addr == "" {
			sc := bufio.NewScanner(strings.NewReader(p.Output()))
			for sc.Scan() {
				var l struct{ Msg, Address string }
				if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "serving" {
					b.addr = l.Address
				}
			}
			return false
		}
		resp, err := http.Get("http://" + admin + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return b
}
