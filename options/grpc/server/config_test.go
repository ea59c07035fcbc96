package server_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/workwire/sdk-go/internal/testcerts"
	"github.com/workwire/sdk-go/options/grpc/server"
)

func TestLoadConfig(t *testing.T) {
	ca := testcerts.NewCA(t)
	cert := ca.Server(t, "broker")
	path := filepath.Join(t.TempDir(), "server.yaml")
	yaml := "tls:\n  certFile: " + cert.CertFile + "\n  keyFile: " + cert.KeyFile + "\n  clientCAFile: " + ca.CAFile() +
		"\nheartbeatInterval: 15s\nqueueSize: 100\nqueueBytes: 1048576\nsourceID: kube\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := server.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if time.Duration(cfg.HeartbeatInterval) != 15*time.Second || cfg.QueueSize != 100 || cfg.QueueBytes != 1<<20 || cfg.SourceID != "kube" || cfg.TLS.ClientCAFile != ca.CAFile() {
		t.Errorf("%+v", cfg)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	err := server.Config{
		QueueSize:  -1,
		QueueBytes: -1,
		QueueWait:  -1,
		TLS:        server.TLSConfig{CertFile: "missing.pem", RequireClientCert: true, MinVersion: "1.1"},
	}.Validate()
	if err == nil {
		t.Fatal("Validate accepted a bad config")
	}
	for _, want := range []string{"queueSize", "queueBytes", "queueWait", "certFile and keyFile", "requireClientCert", "minVersion"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if _, err := server.New(server.Config{}, server.WithAuthenticator(server.CertificateAuthenticator{})); err == nil {
		t.Error("an authenticator without an authorizer was accepted")
	}
	if _, err := server.New(server.Config{}, server.WithService("not a data type", server.NewMemoryService("x"))); err == nil {
		t.Error("a service for a malformed data type was accepted")
	}
}
