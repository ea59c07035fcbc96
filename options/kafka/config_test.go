package kafka_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/kafka"
)

// fileWriter returns a func that writes a file of that name and text in a
// directory of t's, and returns its path.
func fileWriter(t *testing.T) func(name, text string) string {
	dir := t.TempDir()
	return func(name, text string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
}

func TestLoadConfig(t *testing.T) {
	t.Parallel()
	write := fileWriter(t)
	want := kafka.Config{
		Brokers:     []string{"kafka-0.example:9093", "kafka-1.example:9093"},
		ClientID:    "hub-1",
		Version:     "3.7.0",
		TLS:         options.TLSConfig{Enabled: true, ServerName: "kafka.example"},
		SASL:        &kafka.SASLConfig{Mechanism: kafka.SASLScramSHA512, Username: "hub", Password: "secret"},
		Topics:      kafka.Topics{Spec: "ocm.spec", Status: "ocm.status"},
		GroupPrefix: "prod", InitialOffset: "oldest", ReadAllPartitions: true,
		MaxEventBytes: 2 << 20, MaxPending: 500, Compression: "zstd",
		SessionTimeout: options.Duration(30 * time.Second), HeartbeatInterval: options.Duration(5 * time.Second),
		RebalanceTimeout: options.Duration(time.Minute), DrainTimeout: options.Duration(3 * time.Second),
		DialTimeout: options.Duration(5 * time.Second), ReconnectMinBackoff: options.Duration(time.Second),
		ReconnectMaxBackoff: options.Duration(time.Minute),
	}
	yamlFile := write("kafka.yaml", `
brokers: [kafka-0.example:9093, kafka-1.example:9093]
clientID: hub-1
version: 3.7.0
tls:
  enabled: true
  serverName: kafka.example
sasl:
  mechanism: SCRAM-SHA-512
  username: hub
  password: secret
topics:
  spec: ocm.spec
  status: ocm.status
groupPrefix: prod
initialOffset: oldest
readAllPartitions: true
maxEventBytes: 2097152
maxPending: 500
compression: zstd
sessionTimeout: 30s
heartbeatInterval: 5s
rebalanceTimeout: 1m
drainTimeout: 3s
dialTimeout: 5
reconnectMinBackoff: 1s
reconnectMaxBackoff: 1m
`)
	jsonFile := write("kafka.json", `{"brokers":["kafka-0.example:9093","kafka-1.example:9093"],"clientID":"hub-1",
		"version":"3.7.0","tls":{"enabled":true,"serverName":"kafka.example"},
		"sasl":{"mechanism":"SCRAM-SHA-512","username":"hub","password":"secret"},
		"topics":{"spec":"ocm.spec","status":"ocm.status"},"groupPrefix":"prod","initialOffset":"oldest",
		"readAllPartitions":true,"maxEventBytes":2097152,"maxPending":500,"compression":"zstd",
		"sessionTimeout":"30s","heartbeatInterval":"5s","rebalanceTimeout":60,"drainTimeout":"3s","dialTimeout":"5s",
		"reconnectMinBackoff":"1s","reconnectMaxBackoff":"1m"}`)
	for _, p := range []string{yamlFile, jsonFile} {
		got, err := kafka.LoadConfig(p)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got)\n%s", p, diff)
		}
	}

	minimal, err := kafka.LoadConfig(write("minimal.yaml", "brokers: [127.0.0.1:9092]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := minimal.Topics.Names(); !cmp.Equal(got, []string{"workwire.spec", "workwire.status", "workwire.specresync", "workwire.statusresync"}) {
		t.Errorf("default topics %v", got)
	}
	if _, err := kafka.New(minimal); err != nil {
		t.Errorf("New with defaults: %v", err)
	}

	if _, err := kafka.LoadConfig(write("typo.yaml", "brokers: [127.0.0.1:9092]\nbrokerz: x\n")); err == nil || !strings.Contains(err.Error(), "brokerz") {
		t.Errorf("unknown field: %v", err)
	}
	if _, err := kafka.LoadConfig(write("invalid.yaml", "brokers: [nohost]\n")); err == nil || !strings.Contains(err.Error(), "invalid.yaml") {
		t.Errorf("invalid config: %v, want the file named", err)
	}
	if _, err := kafka.LoadConfig(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Error("LoadConfig of a missing file succeeded")
	}
}

func TestConfigValidateReportsEveryProblem(t *testing.T) {
	t.Parallel()
	err := kafka.Config{
		Brokers:             []string{"no-port", ":9092"},
		Version:             "2.0.0",
		SASL:                &kafka.SASLConfig{Mechanism: "GSSAPI"},
		Topics:              kafka.Topics{Spec: "bad topic", Status: "x", SpecResync: "x"},
		GroupPrefix:         "a/b",
		InitialOffset:       "latest",
		Compression:         "brotli",
		MaxEventBytes:       -1,
		MaxPending:          -2,
		SessionTimeout:      options.Duration(time.Second),
		HeartbeatInterval:   options.Duration(2 * time.Second),
		DrainTimeout:        options.Duration(2 * time.Minute),
		DialTimeout:         options.Duration(-time.Second),
		ReconnectMinBackoff: options.Duration(time.Minute),
		ReconnectMaxBackoff: options.Duration(time.Second),
		TLS:                 options.TLSConfig{CertFile: "only-cert.pem"},
	}.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, want := range []string{
		`brokers[0] "no-port"`, `brokers[1] ":9092"`, `version "2.0.0": want 2.1.0 or newer`,
		`mechanism "GSSAPI"`, "username is required", "password or passwordFile is required",
		`topics.spec "bad topic"`, `share topic "x"`, `groupPrefix "a/b"`, `initialOffset "latest"`,
		`compression "brotli"`, "maxEventBytes -1", "maxPending -2",
		"heartbeatInterval 2s must be below sessionTimeout 1s", "drainTimeout 2m0s must be below rebalanceTimeout",
		"dialTimeout -1s", "reconnectMinBackoff 1m0s exceeds", "clientCertFile and clientKeyFile",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	if err := (kafka.Config{}).Validate(); err == nil || !strings.Contains(err.Error(), "brokers: at least one") {
		t.Errorf("empty config: %v", err)
	}
	if _, err := kafka.New(kafka.Config{Brokers: []string{"127.0.0.1:9092"}, Version: "banana"}); err == nil {
		t.Error("New accepted a bad version")
	}
}

func TestTopicsAndKeys(t *testing.T) {
	t.Parallel()
	tp := kafka.Topics{Status: "mine.status"}
	for role, want := range map[options.Role]string{
		options.RoleSpec: kafka.DefaultSpecTopic, options.RoleStatus: "mine.status",
		options.RoleSpecResync: kafka.DefaultSpecResyncTopic, options.RoleStatusResync: kafka.DefaultStatusResyncTopic,
		options.Role(9): "",
	} {
		if got := tp.Topic(role); got != want {
			t.Errorf("Topic(%v) = %q, want %q", role, got, want)
		}
	}
	for _, tt := range []struct {
		r    options.Route
		want string
	}{
		{options.Route{Role: options.RoleSpec, Source: "s", Cluster: "c"}, "c"},
		{options.Route{Role: options.RoleStatus, Source: "s", Cluster: "c"}, "c"},
		{options.Route{Role: options.RoleSpecResync, Cluster: "c"}, "c"},
		{options.Route{Role: options.RoleStatusResync, Source: "s"}, "s"},
	} {
		if got := kafka.Key(tt.r); got != tt.want {
			t.Errorf("Key(%+v) = %q, want %q", tt.r, got, tt.want)
		}
	}
}

func TestSASLPasswordFileConfig(t *testing.T) {
	t.Parallel()
	write := fileWriter(t)
	secret := write("password", "s3cret\n") // as kubectl create secret --from-file keeps an editor's newline
	for _, name := range []string{"kafka.yaml", "kafka.json"} {
		text := "brokers: [127.0.0.1:9092]\nsasl:\n  mechanism: SCRAM-SHA-256\n  username: hub\n  passwordFile: " + secret + "\n"
		if name == "kafka.json" {
			text = `{"brokers":["127.0.0.1:9092"],"sasl":{"mechanism":"SCRAM-SHA-256","username":"hub","passwordFile":"` + secret + `"}}`
		}
		got, err := kafka.LoadConfig(write(name, text))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := &kafka.SASLConfig{Mechanism: kafka.SASLScramSHA256, Username: "hub", PasswordFile: secret}
		if diff := cmp.Diff(want, got.SASL); diff != "" {
			t.Errorf("%s (-want +got)\n%s", name, diff)
		}
		if _, err := kafka.New(got); err != nil {
			t.Errorf("%s: New: %v", name, err)
		}
	}

	empty := write("empty", "\n")
	missing := filepath.Join(filepath.Dir(empty), "nope")
	for _, tt := range []struct {
		name string
		sasl kafka.SASLConfig
		want string
	}{
		{"both", kafka.SASLConfig{Mechanism: kafka.SASLPlain, Username: "u", Password: "p", PasswordFile: secret}, "password and passwordFile are both set"},
		{"neither", kafka.SASLConfig{Mechanism: kafka.SASLPlain, Username: "u"}, "password or passwordFile is required"},
		{"missing file", kafka.SASLConfig{Mechanism: kafka.SASLPlain, Username: "u", PasswordFile: missing}, "sasl: passwordFile: open " + missing},
		{"empty file", kafka.SASLConfig{Mechanism: kafka.SASLPlain, Username: "u", PasswordFile: empty}, "sasl: passwordFile " + empty + " is empty"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := kafka.Config{Brokers: []string{"127.0.0.1:9092"}, SASL: &tt.sasl}.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate: %v, want it to say %q", err, tt.want)
			}
		})
	}
}
