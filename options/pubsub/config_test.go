package pubsub_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/pubsub"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A source's file as OCM's Pub/Sub option reads it loads as it is.
func TestLoadConfigOfOCM(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pubsub.yaml")
	writeFile(t, path, `
endpoint: 127.0.0.1:8085
projectID: fleet-prod
disableTLS: true
topics:
  sourceEvents: projects/fleet-prod/topics/sourceevents
  sourceBroadcast: projects/fleet-prod/topics/sourcebroadcast
subscriptions:
  agentEvents: projects/fleet-prod/subscriptions/agentevents-hub1
  agentBroadcast: projects/fleet-prod/subscriptions/agentbroadcast-hub1
keepaliveSettings:
  time: 5m
  timeout: 20s
  permitWithoutStream: true
receiveSettings:
  maxOutstandingMessages: 500
  numGoroutines: 2
  maxExtension: 10m
`)
	got, err := pubsub.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.ProjectID != "fleet-prod" || got.Endpoint != "127.0.0.1:8085" || !got.DisableTLS ||
		got.Topics.SourceEvents != "projects/fleet-prod/topics/sourceevents" ||
		got.Subscriptions.AgentBroadcast != "projects/fleet-prod/subscriptions/agentbroadcast-hub1" ||
		got.KeepaliveSettings == nil || got.KeepaliveSettings.Time != options.Duration(5*time.Minute) || !got.KeepaliveSettings.PermitWithoutStream ||
		got.ReceiveSettings == nil || got.ReceiveSettings.MaxOutstandingMessages != 500 || got.ReceiveSettings.MaxExtension != options.Duration(10*time.Minute) {
		t.Errorf("loaded %+v", got)
	}
	if _, err := pubsub.New(got); err != nil {
		t.Errorf("New: %v", err)
	}
}

func TestLoadConfigRefusesUnknownKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pubsub.yaml")
	writeFile(t, path, "projectID: fleet-prod\nprojectId: fleet-prod\n")
	_, err := pubsub.LoadConfig(path)
	if err == nil || !strings.Contains(err.Error(), `unknown field "projectId"`) || !strings.Contains(err.Error(), `did you mean "projectID"`) {
		t.Errorf("err = %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  pubsub.Config
		want string
	}{
		{pubsub.Config{}, "projectID is required"},
		{pubsub.Config{ProjectID: "Fleet"}, `projectID "Fleet": want 6 to 30 lower-case letters`},
		{pubsub.Config{ProjectID: "fleet-prod", DisableTLS: true}, "disableTLS needs an endpoint"},
		{pubsub.Config{ProjectID: "fleet-prod", Endpoint: "http://127.0.0.1:8085"}, "want host:port, without a scheme"},
		{pubsub.Config{ProjectID: "fleet-prod", CredentialsFile: "/nonexistent/key.json"}, "credentialsFile: stat /nonexistent/key.json"},
		{pubsub.Config{ProjectID: "fleet-prod", Topics: pubsub.Topics{SourceEvents: "projects/other/topics/sourceevents"}},
			`topics.sourceEvents: "projects/other/topics/sourceevents": want an ID or projects/fleet-prod/topics/<id>`},
		{pubsub.Config{ProjectID: "fleet-prod", Subscriptions: pubsub.Subscriptions{AgentEvents: "goog-events"}}, `subscriptions.agentEvents: "goog-events": an ID is`},
		{pubsub.Config{ProjectID: "fleet-prod", KeepaliveSettings: &pubsub.KeepaliveSettings{Time: options.Duration(time.Second)}}, "keepaliveSettings.time 1s: at least 10s"},
		{pubsub.Config{ProjectID: "fleet-prod", ReceiveSettings: &pubsub.ReceiveSettings{NumGoroutines: -1}}, "receiveSettings.numGoroutines: must not be negative"},
		{pubsub.Config{ProjectID: "fleet-prod", ReconnectMinBackoff: options.Duration(time.Minute), ReconnectMaxBackoff: options.Duration(time.Second)}, "reconnectMinBackoff is above reconnectMaxBackoff"},
	} {
		err := c.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err = %v, want %q", c.cfg, err, c.want)
		}
	}
}
