package server_test

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/workwire/sdk-go/internal/testsupport/testcerts"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc/grpctest"
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

// The server config file of OCM's hub (`server grpc --server-config`)
// loads as it is: its keys go where workwire keeps the same settings, its
// others are accepted, and one setting in both spellings is refused.
func TestLoadConfigReadsOCMsServerConfig(t *testing.T) {
	ca := testcerts.NewCA(t)
	cert := ca.Server(t, "hub")
	write := func(yaml string) string {
		path := filepath.Join(t.TempDir(), "server-config.yaml")
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	ocm := "tls_cert_file: " + cert.CertFile + "\ntls_key_file: " + cert.KeyFile + "\nclient_ca_file: " + ca.CAFile() + `
tls_min_version: 772
tls_max_version: 772
server_bind_port: "8090"
max_concurrent_streams: 4294967295
max_receive_message_size: 8388608
max_send_message_size: 2147483647
write_buffer_size: 32768
read_buffer_size: 32768
connection_timeout: 120s
max_connection_age: 9223372036854775807
client_min_ping_interval: 5s
server_ping_interval: 30s
server_ping_timeout: 10000000000
permit_ping_without_stream: false
cert_watch_interval: 1m
`
	cfg, err := server.LoadConfig(write(ocm))
	if err != nil {
		t.Fatal(err)
	}
	want := server.Config{ListenAddress: ":8090", MaxReceiveBytes: 8 << 20,
		KeepAliveTime: options.Duration(30 * time.Second), KeepAliveTimeout: options.Duration(10 * time.Second), MinClientPingInterval: options.Duration(5 * time.Second),
		TLS: server.TLSConfig{CertFile: cert.CertFile, KeyFile: cert.KeyFile, ClientCAFile: ca.CAFile(), MinVersion: "1.3", MaxVersion: "1.3"}}
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("OCM's file loaded as (-want +got):\n%s", diff)
	}
	for name, tc := range map[string]struct{ yaml, want string }{
		"both spellings":  {"server_bind_port: 8090\nlistenAddress: \":9090\"\n", "listenAddress and server_bind_port are one setting"},
		"a TLS version":   {"tls_min_version: 769\n", "tls_min_version 769: below TLS 1.2, refused"},
		"a TLS name":      {"tls_max_version: VersionTLS10\n", "tls_max_version VersionTLS10: below TLS 1.2, refused"},
		"no TLS version":  {"tls_min_version: TLS12\n", `tls_min_version "TLS12": want VersionTLS12 or VersionTLS13`},
		"both suites":     {"cipher_suites: TLS_AES_128_GCM_SHA256\ntls:\n  cipherSuites: [TLS_AES_128_GCM_SHA256]\n", "tls.cipherSuites and cipher_suites are one setting"},
		"a port":          {"server_bind_port: \"http\"\n", `server_bind_port "http": want a port`},
		"a duration":      {"server_ping_interval: soon\n", `duration "soon"`},
		"a misspelt key":  {"server_bind_prot: 8090\n", "server_bind_prot"},
		"an insecure one": {"tls:\n  certFile: " + cert.CertFile + "\n  keyFile: " + cert.KeyFile + "\n  cipherSuites: [TLS_RSA_WITH_RC4_128_SHA]\n", "TLS_RSA_WITH_RC4_128_SHA is insecure"},
	} {
		if _, err := server.LoadConfig(write(tc.yaml)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, tc.want)
		}
	}
}

// The TLS settings of OCM v1.3's server config (versions by name,
// cipher_suites) and of v1.2's (versions by number) load as the same
// settings; as OCM's server does, a minimum of TLS 1.3 leaves out the
// suites, which TLS 1.3 fixes.
func TestLoadConfigReadsBothOCMReleasesTLSSettings(t *testing.T) {
	ca := testcerts.NewCA(t)
	cert := ca.Server(t, "hub")
	files := "tls_cert_file: " + cert.CertFile + "\ntls_key_file: " + cert.KeyFile + "\nclient_ca_file: " + ca.CAFile() + "\n"
	load := func(yaml string) server.TLSConfig {
		t.Helper()
		path := filepath.Join(t.TempDir(), "server-config.yaml")
		if err := os.WriteFile(path, []byte(files+yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := server.LoadConfig(path)
		if err != nil {
			t.Fatalf("%s: %v", yaml, err)
		}
		return cfg.TLS
	}
	suites := []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"}
	want := server.TLSConfig{CertFile: cert.CertFile, KeyFile: cert.KeyFile, ClientCAFile: ca.CAFile(), MinVersion: "1.2", MaxVersion: "1.3", CipherSuites: suites}
	for name, yaml := range map[string]string{
		"v1.3, names":      "tls_min_version: VersionTLS12\ntls_max_version: VersionTLS13\ncipher_suites: TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256\n",
		"v1.3, TLSv names": "tls_min_version: TLSv1.2\ntls_max_version: \"TLSv1.3\"\ncipher_suites: TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256\n",
		"v1.2, numbers":    "tls_min_version: 771\ntls_max_version: 772\ntls:\n  cipherSuites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256]\n",
	} {
		if diff := cmp.Diff(want, load(yaml)); diff != "" {
			t.Errorf("%s loaded as (-want +got):\n%s", name, diff)
		}
	}
	got := load("tls_min_version: VersionTLS13\ncipher_suites: TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256\n")
	if got.MinVersion != "1.3" || got.CipherSuites != nil {
		t.Errorf("a minimum of TLS 1.3 with suites loaded as %+v, want 1.3 and no suites", got)
	}
}

// OCM's TLS profile ConfigMap reads from where a ConfigMap volume mounts
// it and from its manifest, and replaces a config's version and suites.
func TestLoadTLSProfile(t *testing.T) {
	mounted := t.TempDir()
	// The kubelet's layout: the keys are links into a dated directory.
	dated := filepath.Join(mounted, "..2026_12_04_20_00_00.1")
	if err := os.Mkdir(dated, 0o755); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"minTLSVersion": "VersionTLS12\n", "cipherSuites": "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"} {
		if err := os.WriteFile(filepath.Join(dated, k), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(filepath.Base(dated), k), filepath.Join(mounted, k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Base(dated), filepath.Join(mounted, "..data")); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(t.TempDir(), "ocm-tls-profile.yaml")
	if err := os.WriteFile(manifest, []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: ocm-tls-profile
  namespace: open-cluster-management-hub
data:
  minTLSVersion: VersionTLS12
  cipherSuites: TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384
`), 0o600); err != nil {
		t.Fatal(err)
	}
	want := server.TLSProfile{MinVersion: "VersionTLS12", CipherSuites: "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"}
	for _, path := range []string{mounted, manifest} {
		p, err := server.LoadTLSProfile(path)
		if err != nil {
			t.Fatal(err)
		}
		if p != want {
			t.Errorf("%s: %+v, want %+v", path, p, want)
		}
		c, err := server.TLSConfig{MinVersion: "1.3", MaxVersion: "1.3"}.WithProfile(p)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(server.TLSConfig{MinVersion: "1.2", MaxVersion: "1.3", CipherSuites: []string{"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"}}, c); diff != "" {
			t.Errorf("with the profile (-want +got):\n%s", diff)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	for yaml, want := range map[string]string{
		"kind: Secret\ndata: {}\n":                         `kind "Secret": want a ConfigMap`,
		"kind: ConfigMap\ndata:\n  minTLS: VersionTLS13\n": `key "minTLS"`,
	} {
		if err := os.WriteFile(bad, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := server.LoadTLSProfile(bad); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error saying %q", yaml, err, want)
		}
	}
	if _, err := (server.TLSConfig{}).WithProfile(server.TLSProfile{MinVersion: "VersionTLS11"}); err == nil || !strings.Contains(err.Error(), "below TLS 1.2") {
		t.Errorf("a profile of TLS 1.1: %v, want it refused", err)
	}
}

// A TLS profile refuses weaker clients: below its minimum version, or
// offering none of its cipher suites.
func TestTheTLSProfileRefusesWeakerClients(t *testing.T) {
	ca := testcerts.NewCA(t)
	cert := ca.Server(t, "broker")
	for _, tc := range []struct {
		name    string
		profile server.TLSConfig
		client  *tls.Config
		refused bool
	}{
		{"TLS 1.3 at a minimum of 1.3", server.TLSConfig{MinVersion: "1.3"}, &tls.Config{MinVersion: tls.VersionTLS13}, false},
		{"TLS 1.2 at a minimum of 1.3", server.TLSConfig{MinVersion: "1.3"}, &tls.Config{MaxVersion: tls.VersionTLS12}, true},
		{"a suite of the profile", server.TLSConfig{CipherSuites: []string{"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"}},
			&tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384}}, false},
		{"a suite outside the profile", server.TLSConfig{CipherSuites: []string{"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"}},
			&tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}}, true},
		{"TLS 1.3 beside a TLS 1.2 profile", server.TLSConfig{CipherSuites: []string{"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"}},
			&tls.Config{MinVersion: tls.VersionTLS13}, false},
		{"TLS 1.2 at OCM's profile of VersionTLS13", ocmProfile(t, server.TLSProfile{MinVersion: "VersionTLS13", CipherSuites: "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"}),
			&tls.Config{MaxVersion: tls.VersionTLS12}, true},
		{"a suite outside OCM's profile", ocmProfile(t, server.TLSProfile{CipherSuites: "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"}),
			&tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			profile := tc.profile
			profile.CertFile, profile.KeyFile = cert.CertFile, cert.KeyFile
			srv := grpctest.NewServerWithConfig(t, server.Config{TLS: profile})
			client := tc.client
			client.RootCAs, client.ServerName, client.NextProtos = ca.Pool(), "127.0.0.1", []string{"h2"}
			conn, err := tls.Dial("tcp", srv.Addr(), client)
			if err == nil {
				conn.Close()
			}
			switch {
			case tc.refused && err == nil:
				t.Error("the handshake succeeded")
			case !tc.refused && err != nil:
				t.Errorf("the handshake failed: %v", err)
			}
		})
	}
	err := server.Config{TLS: server.TLSConfig{CertFile: cert.CertFile, KeyFile: cert.KeyFile, MinVersion: "1.3", MaxVersion: "1.2",
		CipherSuites: []string{"TLS_NOT_A_SUITE"}}}.Validate()
	for _, want := range []string{"minVersion 1.3 is above maxVersion 1.2", `"TLS_NOT_A_SUITE" is not a cipher suite`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v, want an error saying %q", err, want)
		}
	}
}

// ocmProfile is the TLS settings of OCM's profile p.
func ocmProfile(t *testing.T, p server.TLSProfile) server.TLSConfig {
	c, err := server.TLSConfig{}.WithProfile(p)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ListenAndServe listens where the config says: an address taken is its
// error; a context ended stops it.
func TestListenAndServe(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	srv, err := server.New(server.Config{ListenAddress: taken.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.ListenAndServe(context.Background()); err == nil || !strings.Contains(err.Error(), taken.Addr().String()) {
		t.Errorf("on a taken address: %v", err)
	}
	srv, err = server.New(server.Config{ListenAddress: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := srv.ListenAndServe(ctx); err != nil {
		t.Errorf("after its context ended: %v", err)
	}
}
