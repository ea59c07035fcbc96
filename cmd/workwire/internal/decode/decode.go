// Package decode is `workwire decode`: one CloudEvent, in any content mode
// workwire's transports put on the wire, read and checked with the SDK's
// own decoders, and printed as the line `workwire tail` prints for each
// event (eventline) or as JSON.
//
// The content modes are the structured mode (the event as one JSON
// object, application/cloudevents+json), the binary mode written as
// header lines and the data (what curl -i prints, or a dump of a Kafka
// record's, a NATS message's or an MQTT packet's headers), and the gRPC
// transport's protobuf CloudEvent. The auto mode tells them apart by
// their first bytes.
package decode

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	cetypes "github.com/cloudevents/sdk-go/v2/types"

	"github.com/workwire/sdk-go/cmd/workwire/internal/cli"
	"github.com/workwire/sdk-go/cmd/workwire/internal/eventline"
)

const long = `
Decode reads one CloudEvent from FILE, or from the standard input when
FILE is "-" or absent, and checks it as workwire's clients do before a
handler sees it: its type and extensions, and a ManifestWork's spec or
status with the codec of its data type (manifestbundles or manifests), or
a resync request's payload.

The event may come in any content mode workwire's transports use:

  structured  the whole event as a JSON object (application/cloudevents+json),
              as MQTT, Kafka, NATS and Pub/Sub carry it in structured mode
  binary      header lines, a blank line, then the data: "ce-id: 1",
              "ce-type: ...", "content-type: application/json" as HTTP, NATS
              and Pub/Sub name them (curl -i prints this form), "ce_id" as
              Kafka does, or the bare names of MQTT's user properties;
              a final newline is not part of the data
  protobuf    the gRPC transport's CloudEvent message (or a PublishRequest)

-content-mode auto (the default) tells them apart by their first bytes.

It prints the event's line: time, type, cluster, resource ID, resource
version, sequence ID, size of the data and source, as workwire tail does.
With -o json it prints the content mode, the attributes, the extensions
and the data (as JSON, when it is JSON).

Exit status 1 means the input is not an event the SDK takes; the error
says why, and where (line, or byte offset in protobuf).`

// Command is `workwire decode`.
func Command() *cli.Command {
	return &cli.Command{
		Name:  "decode",
		Usage: "[-o text|json] [-content-mode auto|structured|binary|protobuf] [FILE]",
		Short: "decode and check one CloudEvent in any content mode",
		Long:  long,
		Flags: func(fs *flag.FlagSet) func(context.Context, *cli.Env, []string) error {
			var out cli.Output
			out.Register(fs)
			mode := fs.String("content-mode", modeAuto, "how the event is laid out: "+strings.Join(modes, ", "))
			return func(_ context.Context, env *cli.Env, args []string) error {
				if err := out.Check(); err != nil {
					return err
				}
				if !slices.Contains(modes, *mode) {
					return cli.Usagef("-content-mode %q: want %s or %s", *mode, strings.Join(modes[:len(modes)-1], ", "), modes[len(modes)-1])
				}
				if len(args) > 1 {
					return cli.Usagef("one FILE at most, not %q", args)
				}
				name, data, err := input(env, args)
				if err != nil {
					return err
				}
				evt, err := read(data, *mode)
				if err == nil {
					err = check(evt)
				}
				if err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
				if out.JSON() {
					return cli.PrintJSON(env.Stdout, viewOf(evt))
				}
				_, err = fmt.Fprintln(env.Stdout, eventline.Format(evt.Event))
				return err
			}
		},
	}
}

// input returns the name and the bytes of the input args name.
func input(env *cli.Env, args []string) (string, []byte, error) {
	if len(args) == 0 || args[0] == "-" {
		data, err := io.ReadAll(env.Stdin)
		if err != nil {
			return "", nil, fmt.Errorf("read standard input: %w", err)
		}
		return "stdin", data, nil
	}
	data, err := os.ReadFile(args[0])
	return args[0], data, err
}

// view is what -o json prints of an event.
type view struct {
	ContentMode string         `json:"contentMode"`
	Attributes  attributes     `json:"attributes"`
	Extensions  map[string]any `json:"extensions,omitempty"`
	// Data is the data as JSON when it is JSON, else as a string when it
	// is text; DataBase64 is data that is neither.
	Data       any    `json:"data,omitempty"`
	DataBase64 []byte `json:"dataBase64,omitempty"`
}

type attributes struct {
	SpecVersion     string `json:"specversion"`
	ID              string `json:"id"`
	Source          string `json:"source"`
	Type            string `json:"type"`
	Subject         string `json:"subject,omitempty"`
	Time            string `json:"time,omitempty"`
	DataContentType string `json:"datacontenttype,omitempty"`
	DataSchema      string `json:"dataschema,omitempty"`
}

func viewOf(evt *event) view {
	v := view{ContentMode: evt.mode, Attributes: attributes{
		SpecVersion: evt.SpecVersion(), ID: evt.ID(), Source: evt.Source(), Type: evt.Type(),
		Subject: evt.Subject(), DataContentType: evt.DataContentType(), DataSchema: evt.DataSchema(),
	}}
	if t := evt.Time(); !t.IsZero() {
		v.Attributes.Time = t.UTC().Format(time.RFC3339Nano)
	}
	if exts := evt.Extensions(); len(exts) > 0 {
		v.Extensions = make(map[string]any, len(exts))
		for name, value := range exts {
			switch value.(type) {
			case string, int32, bool:
				v.Extensions[name] = value
			default:
				s, err := cetypes.Format(value)
				if err != nil {
					s = fmt.Sprint(value)
				}
				v.Extensions[name] = s
			}
		}
	}
	switch data := evt.Data(); {
	case len(data) == 0:
	case json.Valid(data):
		v.Data = json.RawMessage(data)
	case utf8.Valid(data):
		v.Data = string(data)
	default:
		v.DataBase64 = data
	}
	return v
}
