package options

import (
	"crypto/tls"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestPresetLayouts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		layout Layout
		route  Route
		topic  string
		sub    Subscription
		filter string
	}{
		{WorkwireLayout, Route{RoleSpec, "hub1", "cluster1"}, "sources/hub1/clusters/cluster1/spec",
			Subscription{Role: RoleSpec, Cluster: "cluster1"}, "sources/+/clusters/cluster1/spec"},
		{WorkwireLayout, Route{RoleStatus, "hub1", "cluster1"}, "sources/hub1/clusters/cluster1/status",
			Subscription{Role: RoleStatus, Source: "hub1"}, "sources/hub1/clusters/+/status"},
		{WorkwireLayout, Route{Role: RoleSpecResync, Cluster: "cluster1"}, "sources/clusters/cluster1/specresync",
			Subscription{Role: RoleSpecResync}, "sources/clusters/+/specresync"},
		{WorkwireLayout, Route{Role: RoleStatusResync, Source: "hub1"}, "sources/hub1/clusters/statusresync",
			Subscription{Role: RoleStatusResync}, "sources/+/clusters/statusresync"},
		{OCMLayout, Route{RoleSpec, "hub1", "cluster1"}, "sources/hub1/clusters/cluster1/sourceevents",
			Subscription{Role: RoleSpec, Cluster: "cluster1"}, "sources/+/clusters/cluster1/sourceevents"},
		{OCMLayout, Route{RoleStatus, "hub1", "cluster1"}, "sources/hub1/clusters/cluster1/agentevents",
			Subscription{Role: RoleStatus, Source: "hub1"}, "sources/hub1/clusters/+/agentevents"},
		{OCMLayout, Route{Role: RoleSpecResync, Cluster: "cluster1"}, "clusters/cluster1/agentbroadcast",
			Subscription{Role: RoleSpecResync}, "clusters/+/agentbroadcast"},
		{OCMLayout, Route{Role: RoleStatusResync, Source: "hub1"}, "sources/hub1/sourcebroadcast",
			Subscription{Role: RoleStatusResync}, "sources/+/sourcebroadcast"},
	}
	for _, tt := range tests {
		t.Run(tt.topic, func(t *testing.T) {
			t.Parallel()
			topics, err := tt.layout.Compile()
			if err != nil {
				t.Fatal(err)
			}
			got, err := topics.Topic(tt.route)
			if err != nil || got != tt.topic {
				t.Fatalf("Topic = %q, %v; want %q", got, err, tt.topic)
			}
			f, err := topics.Filter(tt.sub)
			if err != nil || f != tt.filter {
				t.Fatalf("Filter = %q, %v; want %q", f, err, tt.filter)
			}
			back, ok := topics.Match(tt.topic)
			if !ok {
				t.Fatal("Match failed")
			}
			if diff := cmp.Diff(tt.route, back); diff != "" {
				t.Fatalf("Match (-want +got)\n%s", diff)
			}
		})
	}
}

func TestLayoutValidation(t *testing.T) {
	t.Parallel()
	custom := Layout{
		Spec:         "x/{source}/{cluster}/s",
		Status:       "x/{source}/{cluster}/t",
		SpecResync:   "y/{cluster}",
		StatusResync: "z/{source}",
	}
	if err := custom.Validate(); err != nil {
		t.Fatalf("valid custom layout: %v", err)
	}
	bad := Layout{
		Spec:         "x/{source}/s",           // lacks {cluster}
		Status:       "x/+/{source}/{cluster}", // wildcard literal
		SpecResync:   "y/{cluster}/{source}",   // must not name a source
		StatusResync: "$SYS/{source}",          // reserved
	}
	err := bad.Validate()
	if err == nil {
		t.Fatal("invalid layout accepted")
	}
	for _, want := range []string{"spec: \"x/{source}/s\" lacks {cluster}", "status", "specresync", "statusresync"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	ambiguous := custom
	ambiguous.Status = "x/{source}/{cluster}/s"
	if err := ambiguous.Validate(); err == nil || !strings.Contains(err.Error(), "can match the same topic") {
		t.Fatalf("ambiguous layout: %v", err)
	}
	topics, _ := WorkwireLayout.Compile()
	if _, err := topics.Topic(Route{RoleSpec, "a/b", "c"}); err == nil {
		t.Fatal("an ID with '/' made a topic")
	}
	if _, err := topics.Topic(Route{Role: RoleSpec, Source: "a"}); err == nil {
		t.Fatal("a spec route without a cluster made a topic")
	}
	if _, ok := topics.Match("sources/a/clusters/b/unknown"); ok {
		t.Fatal("matched an unknown topic")
	}
	if _, ok := topics.Match("sources//clusters/b/spec"); ok {
		t.Fatal("matched an empty ID")
	}
	if _, err := LayoutByName("nope"); err == nil || !strings.Contains(err.Error(), "want workwire or ocm") {
		t.Fatalf("unknown preset: %v", err)
	}
}

// Config files written before the default layout had its name say "seed".
func TestLayoutByNameAcceptsTheFirstName(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"", "workwire", "seed"} {
		if l, err := LayoutByName(name); err != nil || l != WorkwireLayout {
			t.Errorf("LayoutByName(%q) = %+v, %v; want the workwire layout", name, l, err)
		}
	}
}

func TestTLSConfig(t *testing.T) {
	t.Parallel()
	if cfg, err := (TLSConfig{}).Build("h"); err != nil || cfg != nil {
		t.Fatalf("empty config: %v %v", cfg, err)
	}
	cfg, err := TLSConfig{MinVersion: "1.3"}.Build("broker.example")
	if err != nil || cfg.MinVersion != tls.VersionTLS13 || cfg.ServerName != "broker.example" {
		t.Fatalf("min version: %+v %v", cfg, err)
	}
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	err = TLSConfig{CAFile: notPEM, CertFile: "only-cert.pem", MinVersion: "1.0"}.Validate()
	if err == nil {
		t.Fatal("bad TLS config accepted")
	}
	for _, want := range []string{"no PEM certificate", "must be set together", "minVersion"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if !(TLSConfig{CAFile: "x"}).IsEnabled() {
		t.Fatal("a CA alone must mean TLS")
	}
}

type fileConfig struct {
	Broker    string    `json:"broker"`
	KeepAlive Duration  `json:"keepAlive"`
	TLS       TLSConfig `json:"tls"`
}

func TestLoadFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, p := range []string{
		write("c.yaml", "broker: 127.0.0.1:1883\nkeepAlive: 45s\ntls:\n  caFile: /ca.pem\n"),
		write("c.json", `{"broker":"127.0.0.1:1883","keepAlive":45,"tls":{"caFile":"/ca.pem"}}`),
	} {
		var c fileConfig
		if err := LoadFile(p, &c); err != nil {
			t.Fatal(err)
		}
		want := fileConfig{Broker: "127.0.0.1:1883", KeepAlive: Duration(45 * time.Second), TLS: TLSConfig{CAFile: "/ca.pem"}}
		if diff := cmp.Diff(want, c); diff != "" {
			t.Fatalf("%s (-want +got)\n%s", p, diff)
		}
	}
	var c fileConfig
	if err := LoadFile(write("typo.yaml", "brokr: x\n"), &c); err == nil || !strings.Contains(err.Error(), "brokr") {
		t.Fatalf("unknown field: %v", err)
	}
	if err := LoadFile(write("bad.yaml", "keepAlive: soon\n"), &c); err == nil {
		t.Fatal("bad duration accepted")
	}
	if err := LoadFile(filepath.Join(dir, "absent.yaml"), &c); err == nil {
		t.Fatal("missing file accepted")
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	b := Backoff{Min: 100 * time.Millisecond, Max: time.Second}
	// The ceiling doubles per attempt up to Max: 100ms, 200ms, 400ms, 800ms,
	// then 1s for good. Each delay is jittered between Min/2 and the
	// ceiling, and over many draws comes near the ceiling (the odds of 500
	// draws all below 90% of it are under 1e-20).
	for attempt, ceil := range []time.Duration{100, 200, 400, 800, 1000, 1000, 1000} {
		ceil *= time.Millisecond
		highest := time.Duration(0)
		for range 500 {
			d := b.Delay(attempt)
			if d < 50*time.Millisecond || d > ceil {
				t.Fatalf("attempt %d: %v outside [50ms, %v]", attempt, d, ceil)
			}
			highest = max(highest, d)
		}
		if highest < ceil*9/10 {
			t.Errorf("attempt %d: the longest of 500 delays is %v; the ceiling is %v", attempt, highest, ceil)
		}
	}
	if d := b.Delay(1 << 30); d > time.Second {
		t.Errorf("a huge attempt number: %v, over Max", d)
	}
}

func TestDurationRange(t *testing.T) {
	t.Parallel()
	for _, in := range []string{`1e300`, `-1e300`, `9.3e9`, `"2562048h"`} {
		var d Duration
		if err := d.UnmarshalJSON([]byte(in)); err == nil {
			t.Errorf("duration %s: %v, want an out-of-range error", in, time.Duration(d))
		}
	}
	for in, want := range map[string]time.Duration{`9e9`: 9e9 * time.Second, `-1.5`: -1500 * time.Millisecond, `"90m"`: 90 * time.Minute} {
		var d Duration
		if err := d.UnmarshalJSON([]byte(in)); err != nil || time.Duration(d) != want {
			t.Errorf("duration %s: %v, %v; want %v", in, time.Duration(d), err, want)
		}
	}
}

// A route that lacks an ID, or names one no topic can carry, is invalid for
// good: ErrInvalidRoute, which callers do not retry.
func TestRouteValidateNamesItsIDs(t *testing.T) {
	for _, r := range []Route{
		{Role: RoleSpec, Source: "hub"},
		{Role: RoleSpec, Source: "hub", Cluster: "bad/name"},
		{Role: RoleStatus, Source: "a+b", Cluster: "c"},
		{Role: RoleSpecResync, Cluster: "#"},
	} {
		if err := r.Validate(); !errors.Is(err, ErrInvalidRoute) {
			t.Errorf("%+v: %v, want ErrInvalidRoute", r, err)
		}
	}
	if err := (Route{Role: RoleStatusResync, Source: "hub"}).Validate(); err != nil {
		t.Errorf("a valid route: %v", err)
	}
}

// Config files decode as Kubernetes decodes objects: a key in the wrong
// case is unknown, not silently matched; and every error says where.
func TestUnmarshalIsCaseSensitiveAndSaysWhere(t *testing.T) {
	type tls struct {
		CAFile string `json:"caFile,omitempty"`
	}
	type config struct {
		BrokerHost string   `json:"brokerHost"`
		KeepAlive  Duration `json:"keepAlive,omitempty"`
		Retries    int      `json:"retries,omitempty"`
		TLS        tls      `json:"tls,omitempty"`
		Brokers    []string `json:"brokers,omitempty"`
		Peers      []tls    `json:"peers,omitempty"`
	}
	tests := []struct {
		name, doc string
		want      []string // each must appear in the error
	}{
		{"a key in another case", "brokerHost: a:1\nBROKERHOST: b:1\n", []string{`line 2: unknown field "BROKERHOST" (did you mean "brokerHost"?)`}},
		{"a nested key in another case", "brokerHost: a:1\ntls:\n  cafile: /ca.pem\n", []string{`line 3: unknown field "tls.cafile" (did you mean "caFile"?)`}},
		{"a misspelt key", "brokerHots: a:1\n", []string{`line 1: unknown field "brokerHots" (did you mean "brokerHost"?)`}},
		{"a value of the wrong type", "brokerHost: a:1\n\nretries: many\n", []string{"line 3: retries: want int, not string"}},
		{"a wrong type in a list", "brokerHost: a:1\nbrokers:\n- a:1\n- {x: 1}\n", []string{"line 2: brokers: want string, not object"}},
		{"a key in another case in a list", "peers:\n- caFile: /a.pem\n- cafile: /b.pem\n", []string{`line 3: unknown field "peers[1].cafile" (did you mean "caFile"?)`}},
		{"a YAML syntax error", "brokerHost: a:1\ntls: [\n", []string{"yaml: line"}},
		{"a duplicate key", "brokerHost: a:1\nretries: 1\nretries: 2\n", []string{"line 3", "retries"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c config
			err := Unmarshal([]byte(tt.doc), &c)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "JSON") {
				t.Errorf("error %q speaks of JSON in a YAML file", err)
			}
		})
	}
	var c config
	if err := Unmarshal([]byte("brokerHost: a:1\ncolour: red\n"), &c); err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("a key like none: %v, want an error with no guess", err)
	}
	if err := Unmarshal([]byte("brokerHost: a:1\nkeepAlive: 30s\ntls: {caFile: /ca.pem}\n"), &c); err != nil || c.TLS.CAFile != "/ca.pem" || c.KeepAlive != Duration(30*time.Second) {
		t.Errorf("a good file: %+v, %v", c, err)
	}
}

func TestDefaultFillsOnlyZeroValues(t *testing.T) {
	d, n, s := Duration(0), -1, "set"
	Default(&d, Duration(time.Second))
	Default(&n, 5)
	Default(&s, "default")
	if d != Duration(time.Second) || n != -1 || s != "set" {
		t.Errorf("Default gave %v, %d, %q; want 1s, -1 (a set value stays), set", time.Duration(d), n, s)
	}
}
