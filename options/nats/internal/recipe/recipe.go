// Package recipe renders the nats-server setup docs/nats.md documents.
// Every client gets an account of its own, so that it sees nothing it was
// not given, inboxes included. The stream and its consumers live in an
// account that only an administrator logs in to. Each client's account
// imports only its own share of the stream, its own consumer and the
// resync requests meant for it, and its user's permissions repeat those
// imports, so that the server reports any attempt beyond them.
//
// A test keeps the blocks of docs/nats.md equal to what Recipe renders,
// and the isolation test runs a server on the rendered configuration.
package recipe

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/template"

	"github.com/workwire/sdk-go/options/nats"
)

// Recipe is the server setup for a set of sources and clusters, with the
// transport's default stream, subjects and consumer names (nats.Default…).
type Recipe struct {
	// Host and Port are where the server listens for clients; port -1
	// lets the OS pick. Defaults: 0.0.0.0 and 4222.
	Host string
	Port int
	// CAFile is the CA that signs the clients' certificates; CertFile and
	// KeyFile are the server's own certificate and key. Required.
	CAFile, CertFile, KeyFile string
	// StoreDir is where JetStream keeps the stream. Required.
	StoreDir string
	// Admin is the common name of the administrator's certificate. The
	// administrator is the only user of the stream's account. Required.
	Admin string
	// Sources are the IDs of the sources, and Clusters the names of the
	// clusters, whose clients may connect. Each client's certificate has
	// its ID as its common name.
	Sources, Clusters []string
}

// StreamAccount is the account that holds the stream and its consumers.
const StreamAccount = "WORKWIRE"

// AgentAccount returns the account of a cluster's agent.
func AgentAccount(cluster string) string { return "AGENT_" + cluster }

// SourceAccount returns the account of a source.
func SourceAccount(source string) string { return "SOURCE_" + source }

// validate reports every problem of r at once.
func (r Recipe) validate() error {
	var errs []error
	for _, f := range []struct{ key, value string }{
		{"CAFile", r.CAFile}, {"CertFile", r.CertFile}, {"KeyFile", r.KeyFile}, {"StoreDir", r.StoreDir},
	} {
		switch {
		case f.value == "":
			errs = append(errs, fmt.Errorf("%s is required", f.key))
		case strings.ContainsAny(f.value, "\"\\\n"):
			errs = append(errs, fmt.Errorf("%s %q: the path must not contain quotes, backslashes or line breaks", f.key, f.value))
		}
	}
	seen := map[string]string{}
	check := func(kind, id string) {
		if !plain(id) {
			errs = append(errs, fmt.Errorf("%s %q: want letters, digits, '-' and '_' only", kind, id))
			return
		}
		if other, ok := seen[id]; ok {
			errs = append(errs, fmt.Errorf("%s %q is also the %s's name: a certificate's common name must name one client", kind, id, other))
		}
		seen[id] = kind
	}
	check("admin", r.Admin)
	for _, s := range r.Sources {
		check("source", s)
	}
	for _, c := range r.Clusters {
		check("cluster", c)
	}
	if len(errs) > 0 {
		return fmt.Errorf("nats recipe: %w", errors.Join(errs...))
	}
	return nil
}

// plain is what the recipe accepts as an ID: it goes unchanged into
// subjects, consumer names, account names and certificate subjects.
func plain(s string) bool {
	for _, r := range s {
		if !(r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return s != ""
}

// The transport's subjects (see the nats package), with "*" for any ID.
func spec(source, cluster string) string {
	return nats.DefaultSubjectPrefix + ".sources." + source + ".clusters." + cluster + ".spec"
}

func status(source, cluster string) string {
	return nats.DefaultSubjectPrefix + ".sources." + source + ".clusters." + cluster + ".status"
}

func specResync(cluster string) string {
	return nats.DefaultSubjectPrefix + ".sources.clusters." + cluster + ".specresync"
}

func statusResync(source string) string {
	return nats.DefaultSubjectPrefix + ".sources." + source + ".clusters.statusresync"
}

// jsAPI returns a subject of JetStream's API.
func jsAPI(format string, args ...any) string { return "$JS.API." + fmt.Sprintf(format, args...) }

// share is what a client's account imports from StreamAccount: the stream's
// description, the client's own consumer (by name and, in the subject that
// creates it, by filter; its description, which the transport's probe
// reads), and the subjects it sends specs or statuses to.
func share(consumer, filter, sends string) []string {
	return []string{
		jsAPI("STREAM.INFO.%s", nats.DefaultStream),
		jsAPI("CONSUMER.CREATE.%s.%s.%s", nats.DefaultStream, consumer, filter),
		jsAPI("CONSUMER.INFO.%s.%s", nats.DefaultStream, consumer),
		jsAPI("CONSUMER.MSG.NEXT.%s.%s", nats.DefaultStream, consumer),
		"$JS.ACK." + nats.DefaultStream + "." + consumer + ".>",
		sends,
	}
}

// client is the account of one source or agent, and its one user.
type client struct {
	Comment, Account, User string
	// Stream is the client's share of StreamAccount: services it imports
	// and publishes to.
	Stream []string
	// Resync is the subject of the client's resync requests, exported as a
	// stream to the accounts of the other side.
	Resync string
	// Receives is the filter of the resync requests the client receives,
	// and From the accounts it imports them from.
	Receives string
	From     []resync
}

type resync struct{ Account, Subject string }

// Publish is what the client's user may publish to: its share of the
// stream, and its resync requests.
func (c client) Publish() []string { return append(append([]string{}, c.Stream...), c.Resync) }

func (r Recipe) clients() []client {
	var fromAgents, fromSources []resync
	for _, c := range r.Clusters {
		fromAgents = append(fromAgents, resync{AgentAccount(c), specResync(c)})
	}
	for _, s := range r.Sources {
		fromSources = append(fromSources, resync{SourceAccount(s), statusResync(s)})
	}
	var out []client
	for _, s := range r.Sources {
		out = append(out, client{
			Comment: "Source " + s + ": its certificate's common name is " + s + ".",
			Account: SourceAccount(s), User: "CN=" + s,
			Stream:   share(nats.DefaultConsumerPrefix+"_status_"+s, status(s, "*"), spec(s, "*")),
			Resync:   statusResync(s),
			Receives: specResync("*"), From: fromAgents,
		})
	}
	for _, c := range r.Clusters {
		out = append(out, client{
			Comment: "Agent of " + c + ": its certificate's common name is " + c + ".",
			Account: AgentAccount(c), User: "CN=" + c,
			Stream:   share(nats.DefaultConsumerPrefix+"_spec_"+c, spec("*", c), status("*", c)),
			Resync:   specResync(c),
			Receives: statusResync("*"), From: fromSources,
		})
	}
	return out
}

var configTemplate = template.Must(template.New("config").Funcs(template.FuncMap{
	"q": func(s string) string { return `"` + s + `"` },
}).Parse(`host: {{.R.Host}}
port: {{.R.Port}}

# Every client presents a certificate; its subject names its user.
tls {
  ca_file: {{q .R.CAFile}}
  cert_file: {{q .R.CertFile}}
  key_file: {{q .R.KeyFile}}
  verify_and_map: true
}

jetstream {
  store_dir: {{q .R.StoreDir}}
}

accounts {
  # The stream and its consumers. Only the administrator logs in here.
  {{.Account}}: {
    jetstream: enabled
    users: [{user: {{q .Admin}}}]
    exports: [
{{- range .Exports}}
      {service: {{q .}}{{if eq . $.MsgNext}}, response_type: stream{{end}}}
{{- end}}
    ]
  }
{{range .Clients}}
  # {{.Comment}}
  {{.Account}}: {
    users: [{
      user: {{q .User}}
      permissions: {
        publish: {allow: [
{{- range .Publish}}
          {{q .}}
{{- end}}
        ]}
        subscribe: {allow: ["_INBOX.>", {{q .Receives}}]}
      }
    }]
    imports: [
      {service: {account: {{$.Account}}, subject: {{q $.Info}}}}
{{- range .Stream}}
      {service: {account: {{$.Account}}, subject: {{q .}}}}
{{- end}}
{{- range .From}}
      {stream: {account: {{.Account}}, subject: {{q .Subject}}}}
{{- end}}
    ]
    exports: [{stream: {{q .Resync}}}]
  }
{{end}}}
`))

// Config returns the server's configuration file.
func (r Recipe) Config() (string, error) {
	if r.Host == "" {
		r.Host = "0.0.0.0"
	}
	if r.Port == 0 {
		r.Port = 4222
	}
	if err := r.validate(); err != nil {
		return "", err
	}
	stream := nats.DefaultStream
	msgNext := jsAPI("CONSUMER.MSG.NEXT.%s.*", stream)
	var b strings.Builder
	err := configTemplate.Execute(&b, map[string]any{
		"R":       r,
		"Admin":   "CN=" + r.Admin,
		"Account": StreamAccount,
		"Info":    jsAPI("INFO"),
		"MsgNext": msgNext,
		"Exports": []string{
			jsAPI("INFO"),
			jsAPI("STREAM.INFO.%s", stream),
			jsAPI("CONSUMER.CREATE.%s.>", stream),
			jsAPI("CONSUMER.INFO.%s.*", stream),
			msgNext,
			"$JS.ACK." + stream + ".>",
			spec("*", "*"),
			status("*", "*"),
		},
		"Clients": r.clients(),
	})
	if err != nil {
		return "", fmt.Errorf("nats recipe: %w", err)
	}
	return b.String(), nil
}

// StreamConfig returns the stream's configuration, as JetStream's API and
// `nats stream add --config` take it: the stream a transport would create
// with its defaults (see the nats package), which the administrator creates
// instead.
func StreamConfig() string {
	b, err := json.MarshalIndent(struct {
		Name         string   `json:"name"`
		Description  string   `json:"description"`
		Subjects     []string `json:"subjects"`
		Retention    string   `json:"retention"`
		MaxAge       int64    `json:"max_age"`
		Storage      string   `json:"storage"`
		Replicas     int      `json:"num_replicas"`
		MaxConsumers int      `json:"max_consumers"`
	}{
		Name:         nats.DefaultStream,
		Description:  "workwire: specs and statuses",
		Subjects:     []string{spec("*", "*"), status("*", "*")},
		Retention:    "limits",
		MaxAge:       int64(nats.DefaultMaxAge),
		Storage:      "file",
		Replicas:     1,
		MaxConsumers: nats.DefaultMaxConsumers,
	}, "", "  ")
	if err != nil {
		panic(err) // a fixed struct of strings and numbers: a bug here
	}
	return string(b) + "\n"
}
