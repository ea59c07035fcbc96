package mosquitto

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/workwire/sdk-go/options"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// docBlocks returns the fenced code blocks of docs/mosquitto.md by their
// first line, which names the file they are.
func docBlocks(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile("../../../docs/mosquitto.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[string]string{}
	var header string
	var body []string
	in := false
	for _, line := range strings.Split(string(raw), "\n") {
		switch {
		case strings.HasPrefix(line, "```") && !in:
			in, header, body = true, "", nil
		case strings.HasPrefix(line, "```"):
			in = false
			blocks[header] = strings.Join(body, "\n") + "\n"
		case in && header == "" && body == nil:
			header, body = line, []string{}
		case in:
			body = append(body, line)
		}
	}
	return blocks
}

// The doc shows what the isolation test runs: the same renderer with the
// doc's paths.
func TestDocShowsTheRecipe(t *testing.T) {
	blocks := docBlocks(t)
	workwireACL, err := ACL(options.WorkwireLayout, "hub1")
	if err != nil {
		t.Fatal(err)
	}
	ocmACL, err := ACL(options.OCMLayout, "hub1")
	if err != nil {
		t.Fatal(err)
	}
	for header, want := range map[string]string{
		"# /etc/mosquitto/conf.d/workwire.conf": Recipe{
			Port: 8883, CAFile: "/etc/mosquitto/certs/ca.pem", CertFile: "/etc/mosquitto/certs/server.crt",
			KeyFile: "/etc/mosquitto/certs/server.key", ACLFile: "/etc/mosquitto/workwire.acl",
		}.Config(),
		"# /etc/mosquitto/workwire.acl (workwire layout)": workwireACL,
		"# /etc/mosquitto/workwire.acl (ocm layout)":      ocmACL,
	} {
		got, ok := blocks[header]
		if !ok {
			t.Errorf("docs/mosquitto.md has no block starting %q", header)
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("docs/mosquitto.md block %q differs from the renderer (-rendered +doc):\n%s", header, diff)
		}
	}
}

func TestACL(t *testing.T) {
	acl, err := ACL(options.WorkwireLayout, "hub1", "hub2")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"pattern read  sources/+/clusters/%u/spec",
		"user hub2\ntopic write sources/hub2/clusters/+/spec\ntopic read  sources/hub2/clusters/+/status\n",
	} {
		if !strings.Contains(acl, line) {
			t.Errorf("ACL lacks %q:\n%s", line, acl)
		}
	}
	if _, err := ACL(options.WorkwireLayout, "hub/1"); err == nil {
		t.Error("a source ID with '/' was accepted")
	}
	if _, err := ACL(options.Layout{Spec: "x"}, "hub1"); err == nil {
		t.Error("an invalid layout was accepted")
	}
}
