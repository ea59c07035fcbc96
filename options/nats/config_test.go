package nats_test

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/nats"
)

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	writeFile(t, token, "t")
	path := filepath.Join(dir, "nats.yaml")
	writeFile(t, path, `
url: tls://nats-0.example:4222,tls://nats-1.example:4222
tls:
  enabled: true
  serverName: nats.example
tokenFile: `+token+`
stream: FLEET
subjectPrefix: fleet.prod
consumerPrefix: prod
maxAge: 12h
replicas: 3
maxConsumers: 5000
ackWait: 2m
maxAckPending: 500
pullHeartbeat: 5s
maxEventBytes: 65536
connectTimeout: 5s
reconnectMinBackoff: 1s
reconnectMaxBackoff: 1m
`)
	got, err := nats.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	want := nats.Config{
		URL: "tls://nats-0.example:4222,tls://nats-1.example:4222", TLS: options.TLSConfig{Enabled: true, ServerName: "nats.example"},
		TokenFile: token, Stream: "FLEET", SubjectPrefix: "fleet.prod", ConsumerPrefix: "prod",
		MaxAge: options.Duration(12 * time.Hour), Replicas: 3, MaxConsumers: 5000, AckWait: options.Duration(2 * time.Minute),
		MaxAckPending: 500, PullHeartbeat: options.Duration(5 * time.Second), MaxEventBytes: 65536, ConnectTimeout: options.Duration(5 * time.Second),
		ReconnectMinBackoff: options.Duration(time.Second), ReconnectMaxBackoff: options.Duration(time.Minute),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("LoadConfig:\n got %+v\nwant %+v", got, want)
	}

	writeFile(t, path, "url: nats://h:4222\nstreem: X\n")
	if _, err := nats.LoadConfig(path); err == nil || !strings.Contains(err.Error(), `did you mean "stream"`) {
		t.Errorf("a misspelt key: %v", err)
	}
}

func TestConfigValidateReportsEveryProblem(t *testing.T) {
	err := nats.Config{
		URL: "http://h:4222", Stream: "a.b", SubjectPrefix: "a.*", ConsumerPrefix: "x y",
		Username: "u", TokenFile: "/does/not/exist", Password: "p", PasswordFile: "/also/missing",
		Replicas: -1, MaxConsumers: -2, AckWait: options.Duration(-time.Second), PullHeartbeat: options.Duration(20 * time.Second),
		ReconnectMinBackoff: options.Duration(time.Minute), ReconnectMaxBackoff: options.Duration(time.Second),
	}.Validate()
	if err == nil {
		t.Fatal("Validate accepted a broken config")
	}
	for _, want := range []string{`url "http://h:4222"`, `stream "a.b"`, `subjectPrefix "a.*"`, `consumerPrefix "x y"`,
		"three ways to authenticate", "password or passwordFile", "tokenFile", "replicas -1", "maxConsumers -2", "ackWait -1s",
		"pullHeartbeat 20s: want it between 500ms and 15s", "reconnectMinBackoff is above"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate's error lacks %q:\n%v", want, err)
		}
	}
	if err := (nats.Config{}).Validate(); err == nil || !strings.Contains(err.Error(), "url: a server URL") {
		t.Errorf("an empty config: %v", err)
	}
	if _, err := nats.New(nats.Config{URL: "nats://127.0.0.1:4222"}); err != nil {
		t.Errorf("a config of a URL alone: %v", err)
	}
}
