// Package eventline is the one line workwire's commands print for a
// CloudEvent (`workwire decode`, and `workwire tail` for each event it
// sees): when, what, for which cluster and resource, at which version and
// sequence, how large, from whom. One format, so a line from one command
// reads like a line from the other.
//
// The line shows the extensions as they are on the wire, without checking
// them: a line is for looking at an event, even one the SDK would refuse.
package eventline

import (
	"strconv"
	"strings"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	cetypes "github.com/cloudevents/sdk-go/v2/types"

	"github.com/workwire/sdk-go/generic/types"
)

// TimeFormat is how the line writes the event's time, in UTC.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// Format returns evt's line, without a newline:
//
//	<time> <type> cluster=<clustername> resource=<resourceid> version=<resourceversion> sequence=<sequenceid> size=<bytes of data> source=<source>
//
// An absent time or extension is "-"; a value with a space, a quote, an
// equals sign or a control character, or an empty one, is quoted as Go
// quotes strings.
// Format never fails, whatever evt holds (a nil one is "- (no event)"),
// and is goroutine-safe.
func Format(evt *cloudevents.Event) string {
	if evt == nil || evt.Context == nil {
		return "- (no event)"
	}
	var b strings.Builder
	if t := evt.Time(); t.IsZero() {
		b.WriteString("-")
	} else {
		b.WriteString(t.UTC().Format(TimeFormat))
	}
	b.WriteByte(' ')
	b.WriteString(value(evt.Type()))
	for _, f := range []struct{ key, ext string }{
		{"cluster", types.ExtClusterName},
		{"resource", types.ExtResourceID},
		{"version", types.ExtResourceVersion},
		{"sequence", types.ExtSequenceID},
	} {
		b.WriteString(" " + f.key + "=")
		v, ok := types.Extension(evt, f.ext)
		if !ok {
			b.WriteString("-")
			continue
		}
		s, err := cetypes.Format(v)
		if err != nil {
			s = "?"
		}
		b.WriteString(value(s))
	}
	b.WriteString(" size=" + strconv.Itoa(len(evt.Data())))
	b.WriteString(" source=" + value(evt.Source()))
	return b.String()
}

// value is s as the line writes it: quoted if it would not read as one
// word (or is empty, or holds what a terminal would not show as it is).
func value(s string) string {
	if s == "" || strings.ContainsAny(s, " \t\"=") || !strconv.CanBackquote(s) {
		return strconv.Quote(s)
	}
	return s
}
