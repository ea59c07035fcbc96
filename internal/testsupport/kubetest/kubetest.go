// Package kubetest runs a real kube-apiserver, over a real etcd, for the
// tests of the hub Services: client-go's fake clientset agrees with a
// kube-apiserver only where someone taught it to (generations, status
// subresources, finalizers, watch resumption), and a Service must be right
// against the real one.
//
// The binaries are not built by go test: Start skips the test unless
// WORKWIRE_KUBE_APISERVER and WORKWIRE_ETCD name them. .ci/run installs
// Debian's etcd-server and builds kube-apiserver from internal/tools/kubeapiserver.
package kubetest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/workwire/sdk-go/internal/testsupport/proctest"
)

// The variables that name the binaries.
const (
	EnvKubeAPIServer = "WORKWIRE_KUBE_APISERVER"
	EnvEtcd          = "WORKWIRE_ETCD"
)

// readyWithin bounds how long the two processes may take to serve: about
// 2 s on an idle 2-core machine, far more on a loaded one.
const readyWithin = 2 * time.Minute

// adminToken is the bearer token of the system:masters user Start's
// config carries.
const adminToken = "workwire-admin"

// Start starts etcd and a kube-apiserver on loopback ports for t, both
// stopped when t ends, and returns a config of a user that may do
// anything. It skips t unless EnvKubeAPIServer and EnvEtcd name the
// binaries. Each call starts a fresh pair: nothing leaks between tests.
func Start(t testing.TB) *rest.Config {
	t.Helper()
	apiserver, etcd := os.Getenv(EnvKubeAPIServer), os.Getenv(EnvEtcd)
	if apiserver == "" || etcd == "" {
		t.Skipf("no kube-apiserver: set %s and %s to the binaries (.ci/run builds them)", EnvKubeAPIServer, EnvEtcd)
	}
	dir := t.TempDir()
	etcdURL := "http://" + freeAddr(t)
	etcdProc := proctest.Start(t, "etcd", etcd, nil,
		"--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", "http://"+freeAddr(t),
		"--log-level", "warn")

	tokens := filepath.Join(dir, "tokens.csv")
	writeFile(t, tokens, []byte(adminToken+",workwire-admin,workwire-admin,system:masters\n"))
	key, pub := serviceAccountKeys(t, dir)
	host, port, _ := net.SplitHostPort(freeAddr(t))
	apiProc := proctest.Start(t, "kube-apiserver", apiserver, nil,
		"--etcd-servers", etcdURL,
		"--bind-address", host, "--secure-port", port,
		"--cert-dir", filepath.Join(dir, "certs"),
		"--token-auth-file", tokens,
		"--authorization-mode", "RBAC",
		"--service-account-key-file", pub,
		"--service-account-signing-key-file", key,
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-cluster-ip-range", "10.0.0.0/24")

	cfg := &rest.Config{
		Host:        "https://" + net.JoinHostPort(host, port),
		BearerToken: adminToken,
		// The serving certificate is the one kube-apiserver generated for
		// itself; trusting it by file would race its creation.
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS:             -1, // no client-side rate limit
	}
	waitReady(t, cfg, etcdProc, apiProc)
	return cfg
}

// freeAddr returns a loopback address whose port the OS just chose.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// serviceAccountKeys writes the key pair kube-apiserver signs service
// account tokens with, and returns the paths of its private and public
// halves.
func serviceAccountKeys(t testing.TB, dir string) (key, pub string) {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	key, pub = filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	writeFile(t, key, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}))
	writeFile(t, pub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}))
	return key, pub
}

// waitReady polls /readyz until it answers ok; past readyWithin it fails
// t with the end of both logs.
func waitReady(t testing.TB, cfg *rest.Config, etcd, apiserver *proctest.Process) {
	t.Helper()
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	client.Timeout = 5 * time.Second
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(readyWithin)
	var last error
	for wait := 50 * time.Millisecond; time.Now().Before(deadline); wait = min(2*wait, time.Second) {
		if last = ready(client, cfg.Host+"/readyz"); last == nil {
			return
		}
		time.Sleep(wait)
	}
	t.Fatalf("kube-apiserver not ready after %v: %v\n%s\n%s", readyWithin, last, "--- etcd\n"+etcd.Tail(20), "--- kube-apiserver\n"+apiserver.Tail(20))
}

func ready(client *http.Client, url string) error {
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || string(body) != "ok" {
		return fmt.Errorf("%s: %s: %q", url, resp.Status, body)
	}
	return nil
}

var crds = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallCRDs creates the CustomResourceDefinitions in the YAML files and
// waits until each is established.
func InstallCRDs(t testing.TB, cfg *rest.Config, files ...string) {
	t.Helper()
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd unstructured.Unstructured
		if err := yaml.Unmarshal(data, &crd.Object); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if _, err := client.Resource(crds).Create(ctx, &crd, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create the CRD in %s: %v", f, err)
		}
		deadline := time.Now().Add(readyWithin)
		for !established(ctx, client, crd.GetName()) {
			if time.Now().After(deadline) {
				t.Fatalf("CRD %s not established after %v", crd.GetName(), readyWithin)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// OCMAPIModule is the module OCM's CRDs come from.
const OCMAPIModule = "open-cluster-management.io/api"

// InstallOCMCRDs installs the CRDs of OCM's hub that workwire's Services
// serve — ManagedCluster, ManagedClusterAddOn (v1alpha1 and v1beta1, as
// OCM's hub serves it) and ManifestWork — from OCMAPIModule.
func InstallOCMCRDs(t testing.TB, cfg *rest.Config) {
	t.Helper()
	InstallCRDs(t, cfg,
		ModuleFile(t, OCMAPIModule, "cluster/v1/0000_00_clusters.open-cluster-management.io_managedclusters.crd.yaml"),
		ModuleFile(t, OCMAPIModule, "addon/v1beta1/0000_01_addon.open-cluster-management.io_managedclusteraddons.crd.yaml"),
		ModuleFile(t, OCMAPIModule, "work/v1/0000_00_work.open-cluster-management.io_manifestworks.crd.yaml"))
}

func established(ctx context.Context, client dynamic.Interface, name string) bool {
	crd, err := client.Resource(crds).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false
	}
	conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conditions {
		if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// CreateNamespaces creates namespaces, as a cluster's namespace exists on
// a hub before anything is written into it.
func CreateNamespaces(t testing.TB, cfg *rest.Config, names ...string) {
	t.Helper()
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	namespaces := schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	for _, name := range names {
		ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}}}
		if _, err := client.Resource(namespaces).Create(context.Background(), ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create namespace %s: %v", name, err)
		}
	}
}

// Kubeconfig writes cfg (Start's) as a kubeconfig file in a directory of
// t's and returns its path, for programs that read their cluster so.
func Kubeconfig(t testing.TB, cfg *rest.Config) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["cluster"] = &clientcmdapi.Cluster{Server: cfg.Host, InsecureSkipTLSVerify: cfg.Insecure, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["default"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "user"}
	kc.CurrentContext = "default"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// ModuleFile returns the path of a file of a module the main module
// requires, as the go command has it in its module cache: OCM's CRDs come
// from the open-cluster-management.io/api module at the version that
// generated the clientsets the tests use.
func ModuleFile(t testing.TB, module, rel string) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module).Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", module, err)
	}
	path := filepath.Join(strings.TrimSpace(string(out)), filepath.FromSlash(rel))
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	return path
}
