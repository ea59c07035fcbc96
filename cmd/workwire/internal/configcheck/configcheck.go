// Package configcheck is `workwire config check`: a config file loaded
// with the very loader the SDK uses for its type (the transports' and the
// gRPC broker's LoadConfig), so what it reports is what the program would,
// line numbers included. Without -type it tells the type by the file's
// keys: each Config's JSON keys and the keys of OCM's files its loader
// reads too.
package configcheck

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/workwire/sdk-go/cmd/workwire/internal/cli"
	"github.com/workwire/sdk-go/options/grpc"
	"github.com/workwire/sdk-go/options/grpc/server"
	"github.com/workwire/sdk-go/options/kafka"
	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/options/nats"
	"github.com/workwire/sdk-go/options/pubsub"
)

// kind is one type of config file: its name for -type, its loader, and
// the top-level keys the loader reads.
type kind struct {
	name string
	load func(path string) (any, error)
	keys []string
}

// ocmCerts are the certificate keys OCM's MQTT and gRPC files have at the
// top level (internal/ocmfile.Certs), which those loaders read.
var ocmCerts = []string{"caFile", "clientCertFile", "clientKeyFile", "caData", "clientCertData", "clientKeyData"}

// kinds are the config types, in the order -type lists them. The OCM keys
// are those each LoadConfig's doc lists; the package's test checks that
// the loader takes each of them.
var kinds = []kind{
	newKind("mqtt", mqtt.LoadConfig, append([]string{"pubQoS", "subQoS"}, ocmCerts...)...),
	newKind("kafka", kafka.LoadConfig),
	newKind("grpc", grpc.LoadConfig, append([]string{"url", "keepAliveConfig", "serverHealthinessTimeout"}, ocmCerts...)...),
	newKind("nats", nats.LoadConfig),
	newKind("pubsub", pubsub.LoadConfig),
	newKind("broker", server.LoadConfig,
		"server_bind_port", "tls_cert_file", "tls_key_file", "client_ca_file", "tls_min_version", "tls_max_version", "cipher_suites",
		"max_receive_message_size", "server_ping_interval", "server_ping_timeout", "client_min_ping_interval",
		"max_concurrent_streams", "max_send_message_size", "write_buffer_size", "read_buffer_size",
		"connection_timeout", "max_connection_age", "permit_ping_without_stream", "cert_watch_interval"),
}

// newKind is the kind whose loader is load: the keys of its Config C's
// JSON form, and ocm.
func newKind[C any](name string, load func(string) (C, error), ocm ...string) kind {
	return kind{
		name: name,
		load: func(path string) (any, error) { return load(path) },
		keys: append(jsonKeys(reflect.TypeFor[C]()), ocm...),
	}
}

// jsonKeys returns the keys of struct type t's JSON form, as
// encoding/json names them.
func jsonKeys(t reflect.Type) []string {
	var keys []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || !f.IsExported() && !f.Anonymous:
		case name == "" && f.Anonymous && f.Type.Kind() == reflect.Struct:
			keys = append(keys, jsonKeys(f.Type)...)
		case name == "":
			keys = append(keys, f.Name)
		default:
			keys = append(keys, name)
		}
	}
	return keys
}

func names() []string {
	out := make([]string, len(kinds))
	for i, k := range kinds {
		out[i] = k.name
	}
	return out
}

func kindNamed(name string) (kind, bool) {
	i := slices.IndexFunc(kinds, func(k kind) bool { return k.name == name })
	if i < 0 {
		return kind{}, false
	}
	return kinds[i], true
}

const long = `
Config checks a config file of workwire's transports or broker.`

const checkLong = `
Check loads FILE (YAML or JSON) with the loader the SDK uses for its type,
so it reports what the program would, with the lines of the file: mqtt,
kafka, grpc (a client's), nats and pubsub are the transports' files,
broker the gRPC broker's (workwire broker -config). The keys of OCM's
files that the loaders read (caFile, url, server_bind_port, ...) count
too.

Without -type the type is told by the file's keys, and said; a file whose
keys fit more than one type, or none, needs -type.

A valid file prints "FILE: valid <type> config", or with -o json the
config as the SDK reads it (OCM's keys in workwire's; an unset field means
its default), passwords and tokens left out. An invalid one exits 2 with
the loader's errors.`

// Command is `workwire config`, whose subcommand is check.
func Command() *cli.Command {
	return &cli.Command{
		Name:        "config",
		Short:       "check config files",
		Long:        long,
		Subcommands: []*cli.Command{checkCommand()},
	}
}

func checkCommand() *cli.Command {
	return &cli.Command{
		Name:  "check",
		Usage: "[-o text|json] [-type " + strings.Join(names(), "|") + "] FILE",
		Short: "load a config file as the SDK does and report its errors",
		Long:  checkLong,
		Flags: func(fs *flag.FlagSet) func(context.Context, *cli.Env, []string) error {
			var out cli.Output
			out.Register(fs)
			typ := fs.String("type", "", "the file's type: "+strings.Join(names(), ", ")+"; default: told by its keys")
			return func(_ context.Context, env *cli.Env, args []string) error {
				if err := out.Check(); err != nil {
					return err
				}
				if len(args) != 1 {
					return cli.Usagef("want one FILE, not %d arguments", len(args))
				}
				return check(env, args[0], *typ, out.JSON())
			}
		},
	}
}

// check loads the file at path as a typ config (told by its keys if typ
// is ""), and prints that it is valid, or the config.
func check(env *cli.Env, path, typ string, asJSON bool) error {
	var k kind
	var by []string // the keys the type was told by
	if typ != "" {
		var ok bool
		if k, ok = kindNamed(typ); !ok {
			return cli.Usagef("-type %q: want %s", typ, joinWith(names(), "or"))
		}
	} else {
		var err error
		if k, by, err = infer(path); err != nil {
			return cli.UsageError{Err: err}
		}
	}
	inferred := ""
	if by != nil {
		inferred = fmt.Sprintf(" (type inferred from %s)", strings.Join(by, ", "))
	}
	cfg, err := k.load(path)
	if err != nil {
		if by != nil {
			err = fmt.Errorf("%s config%s: %w", k.name, inferred, err)
		}
		return cli.UsageError{Err: err}
	}
	if !asJSON {
		_, err := fmt.Fprintf(env.Stdout, "%s: valid %s config%s\n", path, k.name, inferred)
		return err
	}
	resolved, err := redacted(cfg)
	if err != nil {
		return err
	}
	return cli.PrintJSON(env.Stdout, struct {
		File         string   `json:"file"`
		Type         string   `json:"type"`
		InferredFrom []string `json:"inferredFrom,omitempty"`
		Config       any      `json:"config"`
	}{path, k.name, by, resolved})
}

// infer tells the type of the file at path by its top-level keys: the one
// type whose loader reads every key, or when none does (a typo), the one
// that reads the most of them, whose loader then says what it does not
// read. It returns the keys that told it: those only that type reads, or
// all it reads when none is its own.
func infer(path string) (kind, []string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return kind{}, nil, err
	}
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return kind{}, nil, fmt.Errorf("%s: cannot tell its type: %w; give -type", path, err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(j, &doc); err != nil || len(doc) == 0 {
		return kind{}, nil, fmt.Errorf("%s: no keys to tell its type by: give -type (%s)", path, joinWith(names(), "or"))
	}
	keys := make([]string, 0, len(doc))
	for key := range doc {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	read := make([][]string, len(kinds)) // the keys each kind reads
	best := 0
	for i, k := range kinds {
		for _, key := range keys {
			if slices.Contains(k.keys, key) {
				read[i] = append(read[i], key)
			}
		}
		best = max(best, len(read[i]))
	}
	var fits []int
	for i := range kinds {
		if best > 0 && len(read[i]) == best {
			fits = append(fits, i)
		}
	}
	switch {
	case len(fits) == 0:
		some := "the key"
		if len(keys) > 1 {
			some = "any of the keys"
		}
		return kind{}, nil, fmt.Errorf("%s: cannot tell its type: no config type has %s %s: give -type (%s)",
			path, some, strings.Join(keys, ", "), joinWith(names(), "or"))
	case len(fits) > 1:
		var types, flags []string
		for _, i := range fits {
			types = append(types, kinds[i].name)
			flags = append(flags, "-type "+kinds[i].name)
		}
		return kind{}, nil, fmt.Errorf("%s: cannot tell its type: its keys (%s) fit %s configs alike: give %s",
			path, strings.Join(read[fits[0]], ", "), joinWith(types, "and"), joinWith(flags, "or"))
	}
	i := fits[0]
	var own []string
	for _, key := range read[i] {
		if !slices.ContainsFunc(kinds, func(other kind) bool { return other.name != kinds[i].name && slices.Contains(other.keys, key) }) {
			own = append(own, key)
		}
	}
	if len(own) == 0 {
		own = read[i]
	}
	return kinds[i], own, nil
}

// joinWith joins s as a sentence lists it: "a", "a or b", "a, b or c".
func joinWith(s []string, conj string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " " + conj + " " + s[len(s)-1]
}

// secretKeys are the keys of configs whose values are secrets: mqtt's and
// nats's password, kafka's sasl.password, grpc's token.
var secretKeys = []string{"password", "token"}

// redacted returns cfg as JSON values, with secrets replaced.
func redacted(cfg any) (any, error) {
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("print config: %w", err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, errors.New("print config: " + err.Error())
	}
	redact(v)
	return v, nil
}

func redact(v any) {
	switch v := v.(type) {
	case map[string]any:
		for key, value := range v {
			if s, ok := value.(string); ok && s != "" && slices.Contains(secretKeys, key) {
				v[key] = "(redacted)"
				continue
			}
			redact(value)
		}
	case []any:
		for _, e := range v {
			redact(e)
		}
	}
}
