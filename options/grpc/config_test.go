package grpc_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/workwire/sdk-go/internal/testsupport/testcerts"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc"
)

func TestLoadConfigYAMLAndJSON(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"c.yaml": "serverAddress: dns:///broker:8090\ntls:\n  insecureSkipVerify: true\ntokenFile: /tok\nreconnectMaxBackoff: 5\nmaxEventBytes: 1024\n",
		"c.json": `{"serverAddress":"dns:///broker:8090","tls":{"insecureSkipVerify":true},"tokenFile":"/tok","reconnectMaxBackoff":"5s","maxEventBytes":1024}`,
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := grpc.LoadConfig(path)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if cfg.ServerAddress != "dns:///broker:8090" || cfg.TokenFile != "/tok" || time.Duration(cfg.ReconnectMaxBackoff) != 5*time.Second || cfg.MaxEventBytes != 1024 || !cfg.TLS.InsecureSkipVerify {
			t.Errorf("%s: %+v", name, cfg)
		}
	}
	path := filepath.Join(dir, "typo.yaml")
	_ = os.WriteFile(path, []byte("serverAdress: x:1\n"), 0o600)
	if _, err := grpc.LoadConfig(path); err == nil {
		t.Error("an unknown field was accepted")
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	err := grpc.Config{
		ServerAddress:       "no-port",
		TokenFile:           "/tok",
		ReconnectMinBackoff: options.Duration(time.Minute),
		ReconnectMaxBackoff: options.Duration(time.Second),
		MaxEventBytes:       -1,
		TLS:                 options.TLSConfig{CertFile: "only-cert.pem"},
	}.Validate()
	if err == nil {
		t.Fatal("Validate accepted a bad config")
	}
	for _, want := range []string{"serverAddress", "reconnectMinBackoff", "maxEventBytes", "clientCertFile and clientKeyFile"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if err := (grpc.Config{ServerAddress: "b:1", TokenFile: "/tok"}).Validate(); err == nil || !strings.Contains(err.Error(), "needs TLS") {
		t.Errorf("a token without TLS: %v", err)
	}
	if err := (grpc.Config{ServerAddress: "b:1", TokenFile: "/tok", AllowTokenWithoutTLS: true}).Validate(); err != nil {
		t.Errorf("a token without TLS, allowed: %v", err)
	}
	if _, err := grpc.New(grpc.Config{}); err == nil {
		t.Error("New accepted an empty config")
	}
}

// An OCM gRPC config file (open-cluster-management.io/sdk-go) loads as it
// is; mixing its spelling of a setting with workwire's is an error that
// names both keys.
func TestLoadConfigReadsOCMFiles(t *testing.T) {
	dir := t.TempDir()
	authority := testcerts.NewCA(t)
	client := authority.Client(t, "agent")
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	got, err := grpc.LoadConfig(write("ocm.yaml", `
url: hub.example:8090
caFile: `+authority.CAFile()+`
clientCertFile: `+client.CertFile+`
clientKeyFile: `+client.KeyFile+`
tokenFile: /var/run/token
keepAliveConfig:
  enable: true
  time: 20s
  timeout: 5s
  permitWithoutStream: true
serverHealthinessTimeout: 40s
`))
	if err != nil {
		t.Fatal(err)
	}
	want := grpc.Config{
		ServerAddress: "hub.example:8090",
		TLS:           options.TLSConfig{CAFile: authority.CAFile(), CertFile: client.CertFile, KeyFile: client.KeyFile},
		TokenFile:     "/var/run/token",
		KeepAliveTime: options.Duration(20 * time.Second), KeepAliveTimeout: options.Duration(5 * time.Second),
		HeartbeatTimeout: options.Duration(40 * time.Second),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	// OCM's keep-alive is off unless enabled; its token may be inline.
	off, err := grpc.LoadConfig(write("off.yaml", "url: h:1\ncaFile: "+authority.CAFile()+"\ntoken: abc\nkeepAliveConfig:\n  enable: false\n"))
	if err != nil {
		t.Fatal(err)
	}
	if off.KeepAliveTime >= 0 || off.Token != "abc" {
		t.Errorf("keepAliveTime %v, token %q", time.Duration(off.KeepAliveTime), off.Token)
	}

	for name, tc := range map[string]struct{ text, want string }{
		"address twice":    {"url: h:1\nserverAddress: h:1\n", "serverAddress and url are one setting"},
		"ca twice":         {"url: h:1\ncaFile: " + authority.CAFile() + "\ntls:\n  caFile: " + authority.CAFile() + "\n", "tls.caFile and caFile are one setting"},
		"keep-alive twice": {"url: h:1\nkeepAliveTime: 30s\nkeepAliveConfig:\n  enable: true\n", "keepAliveTime and keepAliveTimeout and keepAliveConfig are one setting"},
		"heartbeat twice":  {"url: h:1\nheartbeatTimeout: 1m\nserverHealthinessTimeout: 1m\n", "heartbeatTimeout and serverHealthinessTimeout"},
		"both tokens":      {"url: h:1\ncaFile: " + authority.CAFile() + "\ntoken: a\ntokenFile: /t\n", "set token or tokenFile, not both"},
		"token in clear":   {"url: h:1\ntoken: a\n", "needs TLS"},
		"embedded key":     {"url: h:1\nclientKeyData: AAAA\n", "clientKeyData: certificates embedded in the file are not supported"},
	} {
		_, err := grpc.LoadConfig(write(strings.ReplaceAll(name, " ", "-")+".yaml", tc.text))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", name, err, tc.want)
		}
	}
}
