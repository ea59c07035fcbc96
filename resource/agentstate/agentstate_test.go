package agentstate_test

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/workwire/sdk-go/internal/testsupport/kubetest"
	"github.com/workwire/sdk-go/resource/agentstate"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// names an agent's objects may have: ordinary, dotted, the longest a
// Kubernetes name may be, and names no file or Secret could be called.
var names = []string{"web", "a.b-c", strings.Repeat("x", 253), "role:admin", "with/slash", ".", ".tmp-lookalike"}

// storeCase opens a Store; a second open over the same backing must see
// what the first kept, as an agent that restarts does.
type storeCase struct {
	name string
	open func(t *testing.T) func() agentstate.Store
}

func cases() []storeCase {
	return []storeCase{
		{"Memory", func(*testing.T) func() agentstate.Store {
			m := agentstate.NewMemory()
			return func() agentstate.Store { return m }
		}},
		{"Dir", func(t *testing.T) func() agentstate.Store {
			dir := filepath.Join(t.TempDir(), "state")
			return func() agentstate.Store {
				d, err := agentstate.NewDir(dir)
				if err != nil {
					t.Fatal(err)
				}
				return d
			}
		}},
		{"Secrets", func(t *testing.T) func() agentstate.Store {
			return secretsOver(t, kubefake.NewClientset().CoreV1().Secrets("agent"))
		}},
	}
}

func secretsOver(t *testing.T, client agentstate.SecretClient) func() agentstate.Store {
	return func() agentstate.Store {
		s, err := agentstate.NewSecrets(client, "workwire-works")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}

func load(t *testing.T, s agentstate.Store) map[string]string {
	t.Helper()
	entries, err := s.Load(context.Background())
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	out := make(map[string]string, len(entries))
	for name, data := range entries {
		out[name] = string(data)
	}
	return out
}

func TestStores(t *testing.T) {
	for _, c := range cases() {
		t.Run(c.name, func(t *testing.T) { testStore(t, c.open(t)) })
	}
}

// The Secrets store against a real kube-apiserver: names, sizes and
// labels as it checks them.
func TestSecretsOnAKubeAPIServer(t *testing.T) {
	cfg := kubetest.Start(t)
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "agent"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testStore(t, secretsOver(t, client.CoreV1().Secrets("agent")))
}

func testStore(t *testing.T, open func() agentstate.Store) {
	ctx := context.Background()
	s := open()
	if got := load(t, s); len(got) != 0 {
		t.Fatalf("a new store holds %v", got)
	}
	want := map[string]string{}
	for i, name := range names {
		data := `{"n":` + strings.Repeat("1", i+1) + `}`
		if err := s.Put(ctx, name, []byte(data)); err != nil {
			t.Fatalf("Put %q: %v", name, err)
		}
		want[name] = data
	}
	if diff := cmp.Diff(want, load(t, s)); diff != "" {
		t.Fatalf("Load after Put (-want +got):\n%s", diff)
	}
	// Put replaces; Delete removes, and a name that is not there is no
	// error.
	if err := s.Put(ctx, "web", []byte(`{"n":"new"}`)); err != nil {
		t.Fatal(err)
	}
	want["web"] = `{"n":"new"}`
	if err := s.Delete(ctx, "a.b-c"); err != nil {
		t.Fatal(err)
	}
	delete(want, "a.b-c")
	if err := s.Delete(ctx, "never-there"); err != nil {
		t.Errorf("Delete of a name not held: %v", err)
	}
	if diff := cmp.Diff(want, load(t, s)); diff != "" {
		t.Fatalf("Load after Put and Delete (-want +got):\n%s", diff)
	}
	// A new store over the same backing, as after a restart, holds the
	// same, and writes over it.
	again := open()
	if diff := cmp.Diff(want, load(t, again)); diff != "" {
		t.Fatalf("Load of a store opened again (-want +got):\n%s", diff)
	}
	if err := again.Put(ctx, "web", []byte(`{"n":"again"}`)); err != nil {
		t.Fatal(err)
	}
	if err := again.Delete(ctx, "role:admin"); err != nil {
		t.Fatal(err)
	}
	want["web"] = `{"n":"again"}`
	delete(want, "role:admin")
	if diff := cmp.Diff(want, load(t, again)); diff != "" {
		t.Fatalf("Load after writes through the store opened again (-want +got):\n%s", diff)
	}
}

// A file left by a process that died while writing is not an entry, and
// goes at the next Load.
func TestDirForgetsHalfWrittenFiles(t *testing.T) {
	dir := t.TempDir()
	d, err := agentstate.NewDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Put(context.Background(), "web", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".tmp-123"), []byte(`{"half`), 0o600); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"web": `{}`}, load(t, d)); diff != "" {
		t.Fatalf("Load (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(dir, ".tmp-123")); !os.IsNotExist(err) {
		t.Errorf("the half-written file is still there: %v", err)
	}
}

// Two holders keep their state in one namespace under two prefixes; each
// sees its own. An entry larger than a Secret holds fails to Put, saying
// so, and leaves what was kept before.
func TestSecretsPrefixesAndSizes(t *testing.T) {
	ctx := context.Background()
	client := kubefake.NewClientset().CoreV1().Secrets("agent")
	works, err := agentstate.NewSecrets(client, "works")
	if err != nil {
		t.Fatal(err)
	}
	widgets, err := agentstate.NewSecrets(client, "widgets")
	if err != nil {
		t.Fatal(err)
	}
	if err := works.Put(ctx, "web", []byte(`"work"`)); err != nil {
		t.Fatal(err)
	}
	if err := widgets.Put(ctx, "web", []byte(`"widget"`)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"web": `"work"`}, load(t, works)); diff != "" {
		t.Errorf("works (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"web": `"widget"`}, load(t, widgets)); diff != "" {
		t.Errorf("widgets (-want +got):\n%s", diff)
	}

	huge := make([]byte, 2<<20)
	_, _ = rand.Read(huge) // does not compress
	err = works.Put(ctx, "web", huge)
	if err == nil || !strings.Contains(err.Error(), "more than a Secret holds") {
		t.Errorf("Put of 2 MiB: %v, want an error saying it is more than a Secret holds", err)
	}
	if diff := cmp.Diff(map[string]string{"web": `"work"`}, load(t, works)); diff != "" {
		t.Errorf("works after the refused Put (-want +got):\n%s", diff)
	}

	if _, err := agentstate.NewSecrets(client, "Not_A_Label"); err == nil {
		t.Error("NewSecrets took a prefix that is no DNS label")
	}
	if _, err := agentstate.NewSecrets(nil, "works"); err == nil {
		t.Error("NewSecrets took a nil client")
	}
}
