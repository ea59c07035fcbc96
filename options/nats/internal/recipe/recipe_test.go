package recipe

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// docBlocks returns the fenced code blocks of docs/nats.md by the file they
// are, which their first line names ("# /etc/nats/workwire.conf") or, for
// JSON, which has no comments, the fence's second word ("```json
// workwire-stream.json").
func docBlocks(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile("../../../../docs/nats.md")
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
			if info := strings.Fields(strings.TrimPrefix(line, "```")); len(info) > 1 {
				header, body = info[1], []string{}
			}
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

// docRecipe is the recipe as docs/nats.md shows it.
var docRecipe = Recipe{
	CAFile: "/etc/nats/certs/ca.pem", CertFile: "/etc/nats/certs/server.crt", KeyFile: "/etc/nats/certs/server.key",
	StoreDir: "/var/lib/nats", Admin: "workwire-admin", Sources: []string{"hub1"}, Clusters: []string{"cluster1"},
}

// The page shows what the isolation test runs: the same renderer with the
// page's paths and clients.
func TestDocShowsTheRecipe(t *testing.T) {
	blocks := docBlocks(t)
	conf, err := docRecipe.Config()
	if err != nil {
		t.Fatal(err)
	}
	for header, want := range map[string]string{
		"# /etc/nats/workwire.conf": conf,
		"workwire-stream.json":      StreamConfig(),
	} {
		got, ok := blocks[header]
		if !ok {
			t.Errorf("docs/nats.md has no block starting %q", header)
			continue
		}
		if diff := firstDifference(want, got); diff != "" {
			t.Errorf("docs/nats.md block %q differs from the renderer: %s", header, diff)
		}
	}
}

// firstDifference describes the first line where doc differs from
// rendered, or returns "". (go-cmp is not among this module's
// dependencies, and one line is enough to fix a page.)
func firstDifference(rendered, doc string) string {
	r, d := strings.Split(rendered, "\n"), strings.Split(doc, "\n")
	for i := range max(len(r), len(d)) {
		line := func(lines []string) string {
			if i < len(lines) {
				return fmt.Sprintf("%q", lines[i])
			}
			return "the end"
		}
		if i >= len(r) || i >= len(d) || r[i] != d[i] {
			return fmt.Sprintf("line %d of the block is %s, the renderer has %s", i+1, line(d), line(r))
		}
	}
	return ""
}

func TestConfig(t *testing.T) {
	r := docRecipe
	r.Sources, r.Clusters = []string{"hub1", "hub2"}, []string{"cluster1", "cluster2"}
	conf, err := r.Config()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		// Each source receives the spec resync requests of every cluster,
		// and each agent the status resync requests of every source.
		"      {stream: {account: AGENT_cluster1, subject: \"workwire.sources.clusters.cluster1.specresync\"}}\n" +
			"      {stream: {account: AGENT_cluster2, subject: \"workwire.sources.clusters.cluster2.specresync\"}}\n",
		"      {stream: {account: SOURCE_hub1, subject: \"workwire.sources.hub1.clusters.statusresync\"}}\n" +
			"      {stream: {account: SOURCE_hub2, subject: \"workwire.sources.hub2.clusters.statusresync\"}}\n",
		"  AGENT_cluster2: {\n    users: [{\n      user: \"CN=cluster2\"\n",
		"\"$JS.API.CONSUMER.CREATE.WORKWIRE.workwire_status_hub2.workwire.sources.hub2.clusters.*.status\"",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("the configuration lacks %q:\n%s", want, conf)
		}
	}
}

// Every problem of a recipe is reported at once.
func TestConfigReportsEveryProblem(t *testing.T) {
	_, err := Recipe{
		KeyFile: `C:\key`, Admin: "hub1", Sources: []string{"hub1", "a.b"}, Clusters: []string{"c*", ""},
	}.Config()
	if err == nil {
		t.Fatal("an invalid recipe was rendered")
	}
	for _, want := range []string{
		"CAFile is required", "CertFile is required", "StoreDir is required", `KeyFile "C:\\key"`,
		`source "hub1" is also the admin's name`, `source "a.b"`, `cluster "c*"`, `cluster ""`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q: %v", want, err)
		}
	}
}
