package mqtt_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/workwire/sdk-go/internal/testsupport/testcerts"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/mqtt"
)

func TestLoadConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	qos := 0
	want := mqtt.Config{
		BrokerHost: "broker.example:8883", Username: "hub", Password: "secret",
		KeepAlive: options.Duration(30 * time.Second), QoS: &qos, Layout: "ocm", SharedGroup: "hubs",
		Will: &mqtt.Will{Topic: "status/hub", Payload: "gone"}, ContentMode: mqtt.ContentModeStructured,
	}
	yamlFile := write("mqtt.yaml", `
brokerHost: broker.example:8883
username: hub
password: secret
keepAlive: 30s
qos: 0
layout: ocm
sharedGroup: hubs
will:
  topic: status/hub
  payload: gone
contentMode: structured
`)
	jsonFile := write("mqtt.json", `{"brokerHost":"broker.example:8883","username":"hub","password":"secret","keepAlive":30,
		"qos":0,"layout":"ocm","sharedGroup":"hubs","will":{"topic":"status/hub","payload":"gone"},"contentMode":"structured"}`)
	for _, p := range []string{yamlFile, jsonFile} {
		got, err := mqtt.LoadConfig(p)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got)\n%s", p, diff)
		}
	}

	custom, err := mqtt.LoadConfig(write("custom.yaml", `
brokerHost: 127.0.0.1:1883
topics:
  spec: a/{source}/{cluster}/spec
  status: a/{source}/{cluster}/status
  specResync: b/{cluster}
  statusResync: c/{source}
`))
	if err != nil || custom.Topics == nil || custom.Topics.SpecResync != "b/{cluster}" {
		t.Fatalf("custom topics: %+v %v", custom.Topics, err)
	}

	// "seed" is the workwire layout's first name: files that use it still load.
	for _, name := range []string{"workwire", "seed"} {
		cfg, err := mqtt.LoadConfig(write(name+".yaml", "brokerHost: 127.0.0.1:1883\nlayout: "+name+"\n"))
		if err != nil {
			t.Fatalf("layout %s: %v", name, err)
		}
		if _, err := mqtt.New(cfg); err != nil {
			t.Fatalf("layout %s: %v", name, err)
		}
	}
}

func TestConfigValidateReportsEveryProblem(t *testing.T) {
	t.Parallel()
	qos := 3
	err := mqtt.Config{
		BrokerHost: "no-port", QoS: &qos, Layout: "weird", SharedGroup: "a/b",
		Will: &mqtt.Will{Topic: "x/#"}, MaxEventBytes: -1, DialTimeout: -1, ReconnectMinBackoff: -1,
		TLS: options.TLSConfig{CertFile: "only-cert.pem"}, ContentMode: "Structured",
	}.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, want := range []string{"brokerHost", "qos 3", "unknown topic layout", "sharedGroup", "will topic", "maxEventBytes", "clientCertFile and clientKeyFile",
		"dialTimeout -1ns", "reconnectMinBackoff -1ns", `contentMode "Structured": want "binary" (default) or "structured"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	for _, url := range []string{"tcp://broker:1883", "ssl://broker:8883", "mqtts://broker:8883"} {
		_, hostPort, _ := strings.Cut(url, "://")
		want := fmt.Sprintf("brokerHost %q: want host:port without a scheme, such as %q (the tls settings turn TLS on)", url, hostPort)
		if err := (mqtt.Config{BrokerHost: url}).Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("brokerHost %s: %v, want %s", url, err, want)
		}
	}
	if err := (mqtt.Config{}).Validate(); err == nil || !strings.Contains(err.Error(), "brokerHost is required") {
		t.Errorf("empty config: %v", err)
	}
	if _, err := mqtt.New(mqtt.Config{BrokerHost: "127.0.0.1:1883", Topics: &options.Layout{Spec: "x"}}); err == nil {
		t.Error("New accepted a broken custom layout")
	}
	if _, err := mqtt.LoadConfig(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Error("LoadConfig of a missing file succeeded")
	}
}

// A misspelt key is refused with the key it most likely meant, in
// workwire's spelling or OCM's, at any depth.
func TestLoadConfigGuessesMisspeltKeys(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "mqtt.yaml")
	if err := os.WriteFile(p, []byte("brokerHost: a:1\nkeepalive: 30s\ntls:\n  cafile: /ca.pem\ntopics:\n  sourceEvent: a/+/b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := mqtt.LoadConfig(p)
	for _, want := range []string{
		`line 2: unknown field "keepalive" (did you mean "keepAlive"?)`,
		`line 4: unknown field "tls.cafile" (did you mean "caFile"?)`,
		`line 6: unknown field "topics.sourceEvent" (did you mean "sourceEvents"?)`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v\nlacks %s", err, want)
		}
	}
}

// An OCM MQTT config file (open-cluster-management.io/sdk-go) loads as it
// is; mixing its spelling of a setting with workwire's is an error that
// names both keys.
func TestLoadConfigReadsOCMFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	authority := testcerts.NewCA(t)
	client := authority.Client(t, "hub")
	ca, cert, key := authority.CAFile(), client.CertFile, client.KeyFile
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// A hub's file, as OCM's source reads it.
	hub, err := mqtt.LoadConfig(write("hub.yaml", `
brokerHost: broker.example:8883
username: hub
password: secret
caFile: `+ca+`
clientCertFile: `+cert+`
clientKeyFile: `+key+`
keepAlive: 30
dialTimeout: 20s
pubQoS: 0
subQoS: 0
topics:
  sourceEvents: sources/hub1/clusters/+/sourceevents
  agentEvents: $share/hubs/sources/hub1/clusters/+/agentevents
  sourceBroadcast: sources/+/sourcebroadcast
  agentBroadcast: clusters/+/agentbroadcast
`))
	if err != nil {
		t.Fatal(err)
	}
	zero := 0
	want := mqtt.Config{
		BrokerHost: "broker.example:8883", Username: "hub", Password: "secret",
		TLS:       options.TLSConfig{CAFile: ca, CertFile: cert, KeyFile: key},
		KeepAlive: options.Duration(30 * time.Second), DialTimeout: options.Duration(20 * time.Second), QoS: &zero,
		Topics:      &options.OCMLayout,
		SharedGroup: "hubs",
	}
	if diff := cmp.Diff(want, hub); diff != "" {
		t.Errorf("hub file (-want +got)\n%s", diff)
	}
	// An agent's file without broadcast topics: they are the ocm layout's.
	agent, err := mqtt.LoadConfig(write("agent.json", `{"brokerHost":"broker.example:1883","topics":{
		"sourceEvents":"sources/hub1/clusters/cluster1/sourceevents","agentEvents":"sources/hub1/clusters/cluster1/agentevents"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&options.OCMLayout, agent.Topics); diff != "" {
		t.Errorf("agent file's topics (-want +got)\n%s", diff)
	}

	for name, tc := range map[string]struct{ text, want string }{
		"ca twice":      {"brokerHost: h:1\ncaFile: " + ca + "\ntls:\n  caFile: " + ca + "\n", "tls.caFile and caFile are one setting"},
		"qos twice":     {"brokerHost: h:1\nqos: 1\npubQoS: 1\n", "qos and pubQoS and subQoS are one setting"},
		"qos differ":    {"brokerHost: h:1\npubQoS: 0\nsubQoS: 1\n", "pubQoS 0 and subQoS 1 differ"},
		"topics mixed":  {"brokerHost: h:1\ntopics:\n  spec: a/{source}/{cluster}\n  sourceEvents: sources/+/clusters/+/sourceevents\n", "mixes workwire's keys"},
		"layout too":    {"brokerHost: h:1\nlayout: ocm\ntopics:\n  sourceEvents: sources/+/clusters/+/sourceevents\n  agentEvents: sources/+/clusters/+/agentevents\n", "layout and topics are one setting"},
		"no agent":      {"brokerHost: h:1\ntopics:\n  sourceEvents: sources/+/clusters/+/sourceevents\n", "topics.agentEvents is required"},
		"bad filter":    {"brokerHost: h:1\ntopics:\n  sourceEvents: a/b/sourceevents\n  agentEvents: sources/+/clusters/+/agentevents\n", `topics.sourceEvents "a/b/sourceevents": want 5 levels ending in sourceevents`},
		"two groups":    {"brokerHost: h:1\ntopics:\n  sourceEvents: $share/a/sources/+/clusters/+/sourceevents\n  agentEvents: $share/b/sources/+/clusters/+/agentevents\n", "two $share groups"},
		"embedded cert": {"brokerHost: h:1\ncaData: AAAA\n", "caData: certificates embedded in the file are not supported"},
	} {
		_, err := mqtt.LoadConfig(write(strings.ReplaceAll(name, " ", "-")+".yaml", tc.text))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", name, err, tc.want)
		}
	}
}
