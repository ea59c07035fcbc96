package pubsub

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/workwire/sdk-go/options"
)

// The topics of the layout OCM's Pub/Sub option uses, one per direction
// and kind: a topic carries every source's or every agent's events, and
// each client reads through subscriptions of its own.
const (
	// SourceEventsTopic carries specs, from every source to every cluster.
	SourceEventsTopic = "sourceevents"
	// AgentEventsTopic carries statuses, from every agent to every source.
	AgentEventsTopic = "agentevents"
	// SourceBroadcastTopic carries sources' status resync requests.
	SourceBroadcastTopic = "sourcebroadcast"
	// AgentBroadcastTopic carries agents' spec resync requests.
	AgentBroadcastTopic = "agentbroadcast"
)

// Defaults of Config.
const (
	// DefaultMaxEventBytes is Pub/Sub's limit of 10 MB per publish request,
	// less 64 KiB for the attributes and the request around the event.
	DefaultMaxEventBytes       = 10_000_000 - 64<<10
	DefaultConnectTimeout      = 10 * time.Second
	DefaultReconnectMinBackoff = 100 * time.Millisecond
	DefaultReconnectMaxBackoff = 30 * time.Second
)

// Config is the Pub/Sub transport's configuration, as a config file holds
// it (see LoadConfig). Its keys are those of OCM's Pub/Sub config file, so
// OCM's file loads as it is, and a few of workwire's. The zero value of
// each optional field means its default.
type Config struct {
	// ProjectID is the Google Cloud project of the topics and
	// subscriptions. Required.
	ProjectID string `json:"projectID"`
	// Endpoint is the Pub/Sub service, host:port: a regional endpoint, or
	// an emulator or pubsubtest server. Default: Google's global endpoint.
	Endpoint string `json:"endpoint,omitempty"`
	// CredentialsFile is a service account's JSON key. Default: Google's
	// application default credentials; none with DisableTLS.
	CredentialsFile string `json:"credentialsFile,omitempty"`
	// DisableTLS connects to Endpoint in plain text and without
	// credentials, as an emulator or pubsubtest expects. Never for
	// Google's service.
	DisableTLS bool `json:"disableTLS,omitempty"`
	// Topics overrides the topics' names, each a topic ID in ProjectID or
	// a full "projects/<project>/topics/<id>". Default: SourceEventsTopic
	// and the others.
	Topics Topics `json:"topics,omitempty"`
	// Subscriptions overrides the names of the client's own subscriptions.
	// Default: "<topic>-<ID>", where ID is the cluster name for an agent
	// ("sourceevents-cluster1", "sourcebroadcast-cluster1") and the source
	// ID for a source ("agentevents-hub1", "agentbroadcast-hub1").
	Subscriptions Subscriptions `json:"subscriptions,omitempty"`
	// Provision creates the topics and the client's subscriptions when
	// they are missing (it needs the Pub/Sub Editor role); without it,
	// Start fails when one is missing. Default: false, as an administrator
	// provisions them (see the package documentation).
	Provision bool `json:"provision,omitempty"`
	// KeepaliveSettings are the gRPC keepalive pings that notice a dead
	// connection. Default: a ping after 5 minutes without activity.
	KeepaliveSettings *KeepaliveSettings `json:"keepaliveSettings,omitempty"`
	// ReceiveSettings tune how many events are read at once. Default:
	// the Pub/Sub client's.
	ReceiveSettings *ReceiveSettings `json:"receiveSettings,omitempty"`
	// MaxEventBytes rejects larger events at Send with options.ErrTooLarge.
	// Default: DefaultMaxEventBytes.
	MaxEventBytes int `json:"maxEventBytes,omitempty"`
	// ConnectTimeout bounds each attempt to reach the service at Start.
	// Default: DefaultConnectTimeout.
	ConnectTimeout options.Duration `json:"connectTimeout,omitempty"`
	// ReconnectMinBackoff and ReconnectMaxBackoff bound the capped
	// exponential backoff between attempts at Start and between restarts
	// of a subscription whose reading failed. Defaults:
	// DefaultReconnectMinBackoff, DefaultReconnectMaxBackoff.
	ReconnectMinBackoff options.Duration `json:"reconnectMinBackoff,omitempty"`
	ReconnectMaxBackoff options.Duration `json:"reconnectMaxBackoff,omitempty"`
}

// Topics names the four topics. Empty names take their defaults.
type Topics struct {
	SourceEvents    string `json:"sourceEvents,omitempty"`
	AgentEvents     string `json:"agentEvents,omitempty"`
	SourceBroadcast string `json:"sourceBroadcast,omitempty"`
	AgentBroadcast  string `json:"agentBroadcast,omitempty"`
}

// Subscriptions names a client's subscriptions: an agent's to
// SourceEvents and SourceBroadcast, a source's to AgentEvents and
// AgentBroadcast. Empty names take their defaults.
type Subscriptions struct {
	SourceEvents    string `json:"sourceEvents,omitempty"`
	AgentEvents     string `json:"agentEvents,omitempty"`
	SourceBroadcast string `json:"sourceBroadcast,omitempty"`
	AgentBroadcast  string `json:"agentBroadcast,omitempty"`
}

// KeepaliveSettings are gRPC's client keepalive parameters.
type KeepaliveSettings struct {
	// Time without activity after which the client pings (at least 10s).
	Time options.Duration `json:"time,omitempty"`
	// Timeout is how long the client waits for the ping's answer before it
	// drops the connection.
	Timeout options.Duration `json:"timeout,omitempty"`
	// PermitWithoutStream pings even when no call is open.
	PermitWithoutStream bool `json:"permitWithoutStream,omitempty"`
}

// ReceiveSettings are the Pub/Sub client's receive settings; zero fields
// keep the client's defaults.
type ReceiveSettings struct {
	MaxExtension               options.Duration `json:"maxExtension,omitempty"`
	MaxDurationPerAckExtension options.Duration `json:"maxDurationPerAckExtension,omitempty"`
	MinDurationPerAckExtension options.Duration `json:"minDurationPerAckExtension,omitempty"`
	MaxOutstandingMessages     int              `json:"maxOutstandingMessages,omitempty"`
	MaxOutstandingBytes        int              `json:"maxOutstandingBytes,omitempty"`
	NumGoroutines              int              `json:"numGoroutines,omitempty"`
}

// LoadConfig reads a Config from a YAML or JSON file, OCM's Pub/Sub file
// included; unknown keys are errors.
func LoadConfig(path string) (Config, error) { return options.LoadConfig[Config](path) }

var (
	// Google Cloud's rule for project IDs.
	projectIDPattern = regexp.MustCompile(`^[a-z][a-z0-9-]{4,28}[a-z0-9]$`)
	// Pub/Sub's rule for topic and subscription IDs.
	resourceIDPattern = regexp.MustCompile(`^[A-Za-z][-A-Za-z0-9._~+%]{2,254}$`)
)

// Validate reports every problem of c at once. It checks that the
// credentials file exists.
func (c Config) Validate() error {
	var errs []error
	if c.ProjectID == "" {
		errs = append(errs, errors.New("projectID is required"))
	} else if !projectIDPattern.MatchString(c.ProjectID) {
		errs = append(errs, fmt.Errorf("projectID %q: want 6 to 30 lower-case letters, digits and '-', starting with a letter and not ending with '-'", c.ProjectID))
	}
	if c.DisableTLS && c.Endpoint == "" {
		errs = append(errs, errors.New("disableTLS needs an endpoint (host:port of an emulator)"))
	}
	if c.DisableTLS && c.CredentialsFile != "" {
		errs = append(errs, errors.New("disableTLS sends no credentials: drop credentialsFile or disableTLS"))
	}
	if strings.Contains(c.Endpoint, "://") {
		errs = append(errs, fmt.Errorf("endpoint %q: want host:port, without a scheme", c.Endpoint))
	}
	if c.CredentialsFile != "" {
		if _, err := os.Stat(c.CredentialsFile); err != nil {
			errs = append(errs, fmt.Errorf("credentialsFile: %w", err))
		}
	}
	for _, n := range []struct{ key, kind, name string }{
		{"topics.sourceEvents", "topics", c.Topics.SourceEvents},
		{"topics.agentEvents", "topics", c.Topics.AgentEvents},
		{"topics.sourceBroadcast", "topics", c.Topics.SourceBroadcast},
		{"topics.agentBroadcast", "topics", c.Topics.AgentBroadcast},
		{"subscriptions.sourceEvents", "subscriptions", c.Subscriptions.SourceEvents},
		{"subscriptions.agentEvents", "subscriptions", c.Subscriptions.AgentEvents},
		{"subscriptions.sourceBroadcast", "subscriptions", c.Subscriptions.SourceBroadcast},
		{"subscriptions.agentBroadcast", "subscriptions", c.Subscriptions.AgentBroadcast},
	} {
		if n.name != "" {
			if _, err := fullName(c.ProjectID, n.kind, n.name); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", n.key, err))
			}
		}
	}
	if k := c.KeepaliveSettings; k != nil {
		if k.Time != 0 && k.Time < options.Duration(10*time.Second) {
			errs = append(errs, fmt.Errorf("keepaliveSettings.time %s: at least 10s (the service refuses more frequent pings)", time.Duration(k.Time)))
		}
		if k.Timeout < 0 {
			errs = append(errs, fmt.Errorf("keepaliveSettings.timeout %s: must not be negative", time.Duration(k.Timeout)))
		}
	}
	if r := c.ReceiveSettings; r != nil {
		for _, n := range []struct {
			key   string
			value int64
		}{
			{"maxExtension", int64(r.MaxExtension)}, {"maxDurationPerAckExtension", int64(r.MaxDurationPerAckExtension)},
			{"minDurationPerAckExtension", int64(r.MinDurationPerAckExtension)}, {"maxOutstandingMessages", int64(r.MaxOutstandingMessages)},
			{"maxOutstandingBytes", int64(r.MaxOutstandingBytes)}, {"numGoroutines", int64(r.NumGoroutines)},
		} {
			if n.value < 0 {
				errs = append(errs, fmt.Errorf("receiveSettings.%s: must not be negative", n.key))
			}
		}
	}
	if c.MaxEventBytes < 0 {
		errs = append(errs, fmt.Errorf("maxEventBytes %d: must not be negative", c.MaxEventBytes))
	}
	for _, d := range []struct {
		key   string
		value options.Duration
	}{{"connectTimeout", c.ConnectTimeout}, {"reconnectMinBackoff", c.ReconnectMinBackoff}, {"reconnectMaxBackoff", c.ReconnectMaxBackoff}} {
		if d.value < 0 {
			errs = append(errs, fmt.Errorf("%s %s: must not be negative", d.key, time.Duration(d.value)))
		}
	}
	if c.ReconnectMaxBackoff > 0 && c.ReconnectMinBackoff > c.ReconnectMaxBackoff {
		errs = append(errs, errors.New("reconnectMinBackoff is above reconnectMaxBackoff"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("pubsub config: %w", errors.Join(errs...))
	}
	return nil
}

// withDefaults returns c with every unset optional field at its default.
func (c Config) withDefaults() Config {
	options.Default(&c.Topics.SourceEvents, SourceEventsTopic)
	options.Default(&c.Topics.AgentEvents, AgentEventsTopic)
	options.Default(&c.Topics.SourceBroadcast, SourceBroadcastTopic)
	options.Default(&c.Topics.AgentBroadcast, AgentBroadcastTopic)
	options.Default(&c.MaxEventBytes, DefaultMaxEventBytes)
	options.Default(&c.ConnectTimeout, options.Duration(DefaultConnectTimeout))
	options.Default(&c.ReconnectMinBackoff, options.Duration(DefaultReconnectMinBackoff))
	options.Default(&c.ReconnectMaxBackoff, options.Duration(DefaultReconnectMaxBackoff))
	return c
}

// fullName returns "projects/<project>/<kind>/<id>" for name, which is an
// ID or already such a name in project.
func fullName(project, kind, name string) (string, error) {
	id := name
	if rest, ok := strings.CutPrefix(name, "projects/"); ok {
		p, after, _ := strings.Cut(rest, "/")
		k, i, _ := strings.Cut(after, "/")
		if p != project || k != kind {
			return "", fmt.Errorf("%q: want an ID or projects/%s/%s/<id>", name, project, kind)
		}
		id = i
	}
	if !resourceIDPattern.MatchString(id) || strings.HasPrefix(strings.ToLower(id), "goog") {
		return "", fmt.Errorf("%q: an ID is 3 to 255 letters, digits and -._~+%%, starts with a letter and not with \"goog\"", id)
	}
	return "projects/" + project + "/" + kind + "/" + id, nil
}
