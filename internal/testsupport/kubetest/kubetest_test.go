package kubetest_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"open-cluster-management.io/api/client/work/clientset/versioned"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/internal/testsupport/kubetest"
)

// The kube-apiserver the tests run against is the client-go they run
// with: k8s.io/kubernetes v1.N.P builds against client-go v0.N.P, and
// each staging module it replaces is at v0.N.P too.
func TestTheKubeAPIServerMatchesClientGo(t *testing.T) {
	mainMod := read(t, filepath.Join("..", "..", "..", "go.mod"))
	clientGo := regexp.MustCompile(`(?m)^\s*k8s\.io/client-go (v0\.\d+\.\d+)\s*$`).FindStringSubmatch(mainMod)
	if clientGo == nil {
		t.Fatal("the main module requires no k8s.io/client-go")
	}
	staging := clientGo[1]
	kas := read(t, filepath.Join("..", "..", "tools", "kubeapiserver", "go.mod"))
	kube := regexp.MustCompile(`(?m)^require k8s\.io/kubernetes (v\S+)$`).FindStringSubmatch(kas)
	if want := "v1." + strings.TrimPrefix(staging, "v0."); kube == nil || kube[1] != want {
		t.Errorf("internal/tools/kubeapiserver requires k8s.io/kubernetes %v; client-go %s wants %s", kube, staging, want)
	}
	replaces := regexp.MustCompile(`(?m)^\s*(k8s\.io/\S+) => (k8s\.io/\S+) (v\S+)$`).FindAllStringSubmatch(kas, -1)
	if len(replaces) == 0 {
		t.Fatal("internal/tools/kubeapiserver replaces no staging module")
	}
	for _, r := range replaces {
		if r[1] != r[2] || r[3] != staging {
			t.Errorf("%s => %s %s; want %s %s", r[1], r[2], r[3], r[1], staging)
		}
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// Start serves a kube-apiserver that takes OCM's CRDs, and whose objects
// get what only a real one gives them.
func TestStartServesOCMsWorkAPI(t *testing.T) {
	cfg := kubetest.Start(t)
	kubetest.InstallCRDs(t, cfg, kubetest.ModuleFile(t, "open-cluster-management.io/api", "work/v1/0000_00_work.open-cluster-management.io_manifestworks.crd.yaml"))
	kubetest.CreateNamespaces(t, cfg, "cluster1")
	client, err := versioned.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	w := &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Name: "w1", Namespace: "cluster1"}}
	created, err := client.WorkV1().ManifestWorks("cluster1").Create(ctx, w, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.UID == "" || created.Generation != 1 || created.ResourceVersion == "" {
		t.Errorf("created work: uid %q, generation %d, resourceVersion %q", created.UID, created.Generation, created.ResourceVersion)
	}
}
