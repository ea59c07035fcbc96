package mqtt_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

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
		Will: &mqtt.Will{Topic: "status/hub", Payload: "gone"},
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
`)
	jsonFile := write("mqtt.json", `{"brokerHost":"broker.example:8883","username":"hub","password":"secret","keepAlive":30,
		"qos":0,"layout":"ocm","sharedGroup":"hubs","will":{"topic":"status/hub","payload":"gone"}}`)
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
}

func TestConfigValidateReportsEveryProblem(t *testing.T) {
	t.Parallel()
	qos := 3
	err := mqtt.Config{
		BrokerHost: "no-port", QoS: &qos, Layout: "weird", SharedGroup: "a/b",
		Will: &mqtt.Will{Topic: "x/#"}, MaxEventBytes: -1,
		TLS: options.TLSConfig{CertFile: "only-cert.pem"},
	}.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, want := range []string{"brokerHost", "qos 3", "unknown topic layout", "sharedGroup", "will topic", "maxEventBytes", "clientCertFile and clientKeyFile"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
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
