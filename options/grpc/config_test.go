package grpc_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	if err := (grpc.Config{ServerAddress: "b:1", TokenFile: "/tok"}).Validate(); err == nil || !strings.Contains(err.Error(), "tokenFile needs TLS") {
		t.Errorf("a token without TLS: %v", err)
	}
	if err := (grpc.Config{ServerAddress: "b:1", TokenFile: "/tok", AllowTokenWithoutTLS: true}).Validate(); err != nil {
		t.Errorf("a token without TLS, allowed: %v", err)
	}
	if _, err := grpc.New(grpc.Config{}); err == nil {
		t.Error("New accepted an empty config")
	}
}
