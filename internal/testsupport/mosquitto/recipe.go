package mosquitto

import (
	"fmt"
	"strings"
	"text/template"

	"github.com/workwire/sdk-go/options"
)

// Recipe is the broker setup docs/mosquitto.md documents: mutual TLS with
// the certificate's common name as the MQTT username, an ACL file, and
// queues deep enough that a subscriber that falls behind loses nothing.
// Config and ACL render it; the isolation test runs what they render, and
// a test here keeps the doc's blocks equal to their output.
type Recipe struct {
	// Port and Bind are the TLS listener's; Bind "" listens on every
	// interface.
	Port int
	Bind string
	// CAFile signs the clients' certificates; CertFile and KeyFile are the
	// broker's own.
	CAFile, CertFile, KeyFile string
	// ACLFile is where the output of ACL is.
	ACLFile string
}

// queueSettings are the lines that keep Mosquitto from dropping the events
// of a subscriber that falls behind. The chaos run over Mosquitto uses them
// too.
const queueSettings = `# Do not drop events of a subscriber that falls behind (the default keeps 1,000 per client):
# above twice the works of the largest hub, whose status subscription takes every status at once
# when a resync asks for all of them.
max_queued_messages 1000000
max_inflight_messages 1000
# No packet size limit is set: Mosquitto's default is the protocol's (256 MB). If you set
# max_packet_size, workwire's clients read it from CONNACK and fail larger events at Send. It
# bounds the whole packet: leave 2 KiB beyond the largest work's manifests and metadata for the
# topic and the event's attributes. Not message_size_limit: clients are not told of it.`

var configTemplate = template.Must(template.New("config").Parse(`per_listener_settings false
allow_anonymous false
acl_file {{.ACLFile}}

listener {{.Port}}{{with .Bind}} {{.}}{{end}}
# The CA that signs the clients' certificates, and the broker's own certificate.
cafile {{.CAFile}}
certfile {{.CertFile}}
keyfile {{.KeyFile}}
require_certificate true
use_identity_as_username true
tls_version tlsv1.2

` + queueSettings + "\n"))

// Config returns the broker's configuration file.
func (r Recipe) Config() string {
	var b strings.Builder
	if err := configTemplate.Execute(&b, r); err != nil {
		panic(err) // the template and Recipe are fixed: a bug here
	}
	return b.String()
}

// QueueSettings returns the recipe's lines that keep subscribers' events
// from being dropped, for a broker set up otherwise (as the chaos run's).
func QueueSettings() string { return queueSettings + "\n" }

var aclTemplate = template.Must(template.New("acl").Funcs(template.FuncMap{
	"topic": func(layout string, source, cluster string) string {
		return strings.NewReplacer(options.SourcePlaceholder, source, options.ClusterPlaceholder, cluster).Replace(layout)
	},
}).Parse(`# Agents: the username is the cluster name (the certificate's CN).
pattern read  {{topic .L.Spec "+" "%u"}}
pattern write {{topic .L.Status "+" "%u"}}
pattern write {{topic .L.SpecResync "" "%u"}}
pattern read  {{topic .L.StatusResync "+" ""}}
# The agent's probe of its own specs.
pattern write {{topic .L.Spec .Probe "%u"}}
{{range .Sources}}
# Source {{.}}: the username is the source ID.
user {{.}}
topic write {{topic $.L.Spec . "+"}}
topic read  {{topic $.L.Status . "+"}}
topic read  {{topic $.L.SpecResync "" "+"}}
topic write {{topic $.L.StatusResync . ""}}
# The source's probe of its own statuses.
topic write {{topic $.L.Status . $.Probe}}
{{end}}`))

// ACL returns the ACL file of the recipe for a topic layout and the IDs of
// the sources that may connect: every agent reads only its own cluster's
// specs and writes only its own statuses and spec resyncs; every source
// writes only its own specs and status resyncs and reads only its own
// statuses.
func ACL(layout options.Layout, sources ...string) (string, error) {
	if err := layout.Validate(); err != nil {
		return "", err
	}
	for _, s := range sources {
		if err := options.ValidateID("source", s); err != nil {
			return "", err
		}
	}
	var b strings.Builder
	if err := aclTemplate.Execute(&b, struct {
		L       options.Layout
		Probe   string
		Sources []string
	}{layout, options.ProbePeer, sources}); err != nil {
		return "", fmt.Errorf("acl: %w", err)
	}
	return b.String(), nil
}
