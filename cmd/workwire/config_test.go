package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// config check loads a file of each type with the SDK's loader: a valid
// one prints that it is, an invalid one exits 2 with the loader's error
// and its line; without -type the type is told by the keys, and said.
func TestConfigCheck(t *testing.T) {
	for _, tc := range []struct {
		typ, name string
		lines     []string
		stderr    string // "" for a valid file
	}{
		{"mqtt", "mqtt", []string{"brokerHost: 127.0.0.1:1883", "qos: 1", "keepAlive: 30s"}, ""},
		{"mqtt", "mqtt, OCM's keys", []string{"brokerHost: 127.0.0.1:1883", "username: hub", "password: secret", "pubQoS: 1", "subQoS: 1",
			"topics:", "  sourceEvents: sources/hub1/clusters/+/sourceevents", "  agentEvents: sources/hub1/clusters/+/agentevents"}, ""},
		{"mqtt", "mqtt, a typo", []string{"# the hub's broker", "brokerHost: 127.0.0.1:1883", "keepAlivee: 30s"},
			`line 3: unknown field "keepAlivee" (did you mean "keepAlive"?)`},
		{"kafka", "kafka", []string{"brokers:", "  - 127.0.0.1:9092", "topics:", "  spec: fleet.spec"}, ""},
		{"kafka", "kafka, a nested typo", []string{"brokers: [127.0.0.1:9092]", "topics:", "  spec: fleet.spec", "  stauts: fleet.status"},
			`line 4: unknown field "topics.stauts"`},
		{"grpc", "grpc", []string{"serverAddress: 127.0.0.1:8090", "heartbeatTimeout: 30s"}, ""},
		{"grpc", "grpc, OCM's keys", []string{"url: 127.0.0.1:8090", "keepAliveConfig:", "  enable: true", "  time: 30s"}, ""},
		{"grpc", "grpc, a typo", []string{"serverAddress: 127.0.0.1:8090", "", "heartbeatTimeot: 30s"},
			`line 3: unknown field "heartbeatTimeot" (did you mean "heartbeatTimeout"?)`},
		{"nats", "nats", []string{"url: nats://127.0.0.1:4222", "stream: FLEET"}, ""},
		{"nats", "nats, a wrong type", []string{"url: nats://127.0.0.1:4222", "stream: FLEET", "replicas: three"},
			"line 3: replicas: want int, not string"},
		{"pubsub", "pubsub", []string{"projectID: fleet-project", "endpoint: 127.0.0.1:8085", "disableTLS: true"}, ""},
		{"pubsub", "pubsub, a typo", []string{"projectID: fleet-project", "", "endpoint: 127.0.0.1:8085", "provison: true"},
			`line 4: unknown field "provison" (did you mean "provision"?)`},
		{"broker", "broker", []string{"listenAddress: 127.0.0.1:0", "heartbeatInterval: 1s"}, ""},
		{"broker", "broker, OCM's keys", []string{"server_bind_port: 8090", "max_concurrent_streams: 100"}, ""},
		{"broker", "broker, a typo", []string{"# a broker", "listenAddress: 127.0.0.1:0", "heartbeatIntervall: 1s"},
			`line 3: unknown field "heartbeatIntervall"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := file(t, "config.yaml", tc.lines...)
			for _, args := range [][]string{
				{"config", "check", "-type", tc.typ, path},
				{"config", "check", path},
			} {
				inferred := len(args) == 3
				code, stdout, stderr := workwire(t, args...)
				switch {
				case tc.stderr == "":
					want := path + ": valid " + tc.typ + " config"
					if inferred {
						want += " (type inferred from "
					} else {
						want += "\n"
					}
					if code != 0 || !strings.HasPrefix(stdout, want) || stderr != "" {
						t.Errorf("workwire %v: exit %d, want 0; stdout (want %q):\n%s\nstderr:\n%s", args, code, want, stdout, stderr)
					}
				case code != 2 || stdout != "" || !strings.Contains(stderr, tc.stderr) || !strings.Contains(stderr, path):
					t.Errorf("workwire %v: exit %d, want 2; stdout:\n%s\nstderr (want %q):\n%s", args, code, stdout, tc.stderr, stderr)
				case inferred && !strings.Contains(stderr, tc.typ+" config (type inferred from "):
					t.Errorf("workwire %v: stderr does not say the type it inferred:\n%s", args, stderr)
				}
			}
		})
	}
}

// A file whose keys fit several types, or none, or that has none, needs
// -type: exit 2 saying so; so does a bad command line.
func TestConfigCheckNeedsType(t *testing.T) {
	for _, tc := range []struct {
		name   string
		lines  []string
		args   []string
		stderr string
	}{
		{name: "url is gRPC's and NATS's", lines: []string{"url: 127.0.0.1:8090"},
			stderr: "its keys (url) fit grpc and nats configs alike: give -type grpc or -type nats"},
		{name: "heartbeatInterval is Kafka's and the broker's", lines: []string{"heartbeatInterval: 3s", "tls: {}"},
			stderr: "fit kafka and broker configs alike: give -type kafka or -type broker"},
		{name: "no type has the keys", lines: []string{"endpoints: [a, b]", "retries: 3"},
			stderr: "no config type has any of the keys endpoints, retries: give -type (mqtt, kafka, grpc, nats, pubsub or broker)"},
		{name: "no keys", lines: []string{"# nothing yet"}, stderr: "no keys to tell its type by: give -type"},
		{name: "not YAML", lines: []string{"brokerHost: [127.0.0.1"}, stderr: "cannot tell its type: yaml: line 1"},
		{name: "an unknown -type", lines: []string{"brokerHost: 127.0.0.1:1883"}, args: []string{"-type", "amqp"},
			stderr: `-type "amqp": want mqtt, kafka, grpc, nats, pubsub or broker`},
		{name: "bad -o", lines: []string{"brokerHost: 127.0.0.1:1883"}, args: []string{"-o", "yaml"}, stderr: `-o "yaml"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := file(t, "config.yaml", tc.lines...)
			args := append(append([]string{"config", "check"}, tc.args...), path)
			code, stdout, stderr := workwire(t, args...)
			if code != 2 || stdout != "" || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("exit %d, want 2; stdout:\n%s\nstderr (want %q):\n%s", code, stdout, tc.stderr, stderr)
			}
		})
	}
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"config", "check"}, "want one FILE, not 0 arguments"},
		{[]string{"config", "check", "a.yaml", "b.yaml"}, "want one FILE, not 2 arguments"},
		{[]string{"config", "check", "/nonexistent/config.yaml"}, "no such file"},
		{[]string{"config", "check", "-type", "mqtt", "/nonexistent/config.yaml"}, "no such file"},
		{[]string{"config"}, "workwire config <command>"},
		{[]string{"config", "nosuch"}, "unknown command"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			code, _, stderr := workwire(t, tc.args...)
			if code != 2 || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("exit %d, want 2; stderr (want %q):\n%s", code, tc.stderr, stderr)
			}
		})
	}
}

// -o json prints the config as the SDK reads it: OCM's keys in
// workwire's, the type and what told it, secrets left out.
func TestConfigCheckJSON(t *testing.T) {
	t.Parallel()
	path := file(t, "mqtt.yaml", "brokerHost: 127.0.0.1:1883", "username: hub", "password: secret", "pubQoS: 2", "subQoS: 2")
	code, stdout, stderr := workwire(t, "config", "check", "-o", "json", path)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("%v:\n%s", err, stdout)
	}
	want := map[string]any{
		"file": path, "type": "mqtt", "inferredFrom": []any{"brokerHost", "pubQoS", "subQoS"},
		"config": map[string]any{
			"brokerHost": "127.0.0.1:1883", "username": "hub", "password": "(redacted)", "qos": 2.0, "tls": map[string]any{},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%s\nwant %v", stdout, want)
	}
}
