package decode

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc/protocol"
)

// The content modes -content-mode names.
const (
	modeAuto       = "auto"
	modeStructured = "structured"
	modeBinary     = "binary"
	modeProtobuf   = "protobuf"
)

var modes = []string{modeAuto, modeStructured, modeBinary, modeProtobuf}

// structuredType starts the content type of a structured-mode event, as
// every transport's binding reads it.
const structuredType = "application/cloudevents+json"

// event is a CloudEvent read from the input, the content mode it came in,
// and where its attributes were, for errors about them.
type event struct {
	*cloudevents.Event
	mode string
	// at is where each attribute and extension was in the input, by name
	// ("line 3"); "data" is where the data starts.
	at map[string]string
}

// where returns "line N: " for attribute name, or "" if it is not known.
func (e *event) where(name string) string {
	if s, ok := e.at[name]; ok {
		return s + ": "
	}
	return ""
}

// read returns the event data holds in content mode mode (modeAuto: the
// one it looks like). Its errors name the mode and the place (line, or
// byte offset for protobuf) where the input stops being an event.
func read(data []byte, mode string) (evt *event, err error) {
	defer func() {
		// The decoders are fed whatever the user has: a panic in one is a
		// bad input, reported as such.
		if r := recover(); r != nil {
			evt, err = nil, fmt.Errorf("%s mode: decoder panic: %v", mode, r)
		}
	}()
	data = bytes.TrimPrefix(data, []byte("\ufeff")) // a byte order mark some editors write
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("no event: the input is empty")
	}
	label := mode + " mode"
	if mode == modeAuto {
		if mode, err = sniff(data); err != nil {
			return nil, err
		}
		label = mode + " mode"
		if mode == modeProtobuf {
			label += " (the input is not text)"
		}
	}
	switch mode {
	case modeStructured:
		evt, err = readStructured(data, 1)
	case modeBinary:
		evt, err = readBinary(data)
	default:
		evt, err = readProtobuf(data)
	}
	var inMode *modeError
	switch {
	case errors.As(err, &inMode):
		return nil, fmt.Errorf("%s: %w", inMode.label, inMode.err)
	case err != nil:
		return nil, fmt.Errorf("%s: %w", label, err)
	}
	return evt, nil
}

// modeError is an error of an event in another content mode than the one
// read was asked for: a structured-mode event in header lines.
type modeError struct {
	label string
	err   error
}

func (e *modeError) Error() string { return e.label + ": " + e.err.Error() }
func (e *modeError) Unwrap() error { return e.err }

// sniff says which content mode data looks like: header lines (binary),
// a JSON object (structured), or bytes no text has (protobuf; every
// protobuf CloudEvent with a source or a specversion has such bytes:
// the keys of fields 2 and 3).
func sniff(data []byte) (string, error) {
	if looksLikeHeaders(data) {
		return modeBinary, nil
	}
	if !isText(data) {
		return modeProtobuf, nil
	}
	if trimmed := bytes.TrimLeft(data, " \t\r\n"); trimmed[0] == '{' {
		return modeStructured, nil
	}
	first, _, _ := strings.Cut(strings.TrimLeft(string(data), " \t\r\n"), "\n")
	if r := []rune(first); len(r) > 40 {
		first = string(r[:40]) + "…"
	}
	return "", fmt.Errorf("not a CloudEvent in any content mode: it begins %q, which is neither a JSON object (structured), "+
		`nor a header line such as "ce-id: 1" (binary), nor protobuf; -content-mode says which it is`, strings.TrimRight(first, "\r"))
}

// isText reports whether b is UTF-8 without control characters but
// whitespace.
func isText(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	return bytes.IndexFunc(b, func(r rune) bool { return r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0x7f }) < 0
}

// looksLikeHeaders reports whether data begins with header lines: an HTTP
// status or request line (curl -i) or "name: value", in text.
func looksLikeHeaders(data []byte) bool {
	head, _, _ := bytes.Cut(data, []byte("\n\n"))
	head, _, _ = bytes.Cut(head, []byte("\r\n\r\n"))
	if !isText(head) {
		return false
	}
	first, _, _ := strings.Cut(strings.TrimLeft(string(head), "\r\n"), "\n")
	first = strings.TrimRight(first, "\r")
	if isStartLine(first) {
		return true
	}
	name, _, ok := strings.Cut(first, ":")
	return ok && isToken(name)
}

// isStartLine reports whether line is an HTTP status line ("HTTP/1.1 200
// OK") or request line ("POST /events HTTP/1.1").
func isStartLine(line string) bool {
	if strings.HasPrefix(line, "HTTP/") {
		return true
	}
	f := strings.Fields(line)
	return len(f) == 3 && strings.HasPrefix(f[2], "HTTP/") && isToken(f[0])
}

// isToken reports whether s is an HTTP header name (RFC 9110 token).
func isToken(s string) bool {
	return s != "" && strings.IndexFunc(s, func(r rune) bool {
		return r > 0x7e || r <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r)
	}) < 0
}

// isAttributeName reports whether name is a CloudEvents attribute name:
// lower-case ASCII letters and digits.
func isAttributeName(name string) bool {
	return name != "" && strings.IndexFunc(name, func(r rune) bool { return (r < 'a' || r > 'z') && (r < '0' || r > '9') }) < 0
}

// readStructured reads a structured-mode event (the whole event as a JSON
// object), as the transports do (cloudevents' Event.UnmarshalJSON), and
// says where an attribute it refuses is. firstLine is the line of the
// input data starts at.
func readStructured(data []byte, firstLine int) (*event, error) {
	var raw json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			// Offset counts the bytes read, the one at fault included.
			return nil, fmt.Errorf("%s: %v", position(data, int(syn.Offset)-1, firstLine), err)
		}
		return nil, err
	}
	members, err := objectMembers(data, firstLine)
	if err != nil {
		return nil, err
	}
	evt := &event{mode: modeStructured, at: map[string]string{}}
	for _, m := range members {
		evt.at[m.key] = m.at
	}
	e := cloudevents.New()
	if err := e.UnmarshalJSON(data); err != nil {
		return nil, locateMember(members, err)
	}
	if err := e.Validate(); err != nil {
		return nil, validationError(err, evt.at, func(name string) string { return name })
	}
	evt.Event = &e
	return evt, nil
}

// member is one attribute of a structured-mode event: its key, its value,
// and the line the key is on.
type member struct {
	key string
	raw json.RawMessage
	at  string
}

// objectMembers returns the members of the JSON object data, which is
// valid JSON, in order.
func objectMembers(data []byte, firstLine int) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	start := len(data) - len(bytes.TrimLeft(data, " \t\r\n"))
	if tok, _ := dec.Token(); tok != json.Delim('{') {
		kind := "a string"
		switch tok.(type) {
		case json.Delim:
			kind = "an array"
		case float64, json.Number:
			kind = "a number"
		case bool:
			kind = "a boolean"
		case nil:
			kind = "null"
		}
		return nil, fmt.Errorf("%s: want a JSON object (the event), not %s", position(data, start, firstLine), kind)
	}
	var members []member
	for dec.More() {
		off := int(dec.InputOffset())
		for off < len(data) && (data[off] == ',' || data[off] == ' ' || data[off] == '\t' || data[off] == '\r' || data[off] == '\n') {
			off++
		}
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		members = append(members, member{key: key, raw: raw, at: lineOf(data, off, firstLine)})
	}
	return members, nil
}

// locateMember returns err, which cloudevents' decoder returned for an
// event of members, with the member it is about: the first one that the
// decoder refuses alone (with the specversion, which says how to read it).
func locateMember(members []member, err error) error {
	var version json.RawMessage
	for _, m := range members {
		if m.key == "specversion" {
			version = m.raw
		}
	}
	for _, m := range members {
		one := map[string]json.RawMessage{m.key: m.raw}
		if version != nil {
			one["specversion"] = version
		}
		b, merr := json.Marshal(one)
		if merr != nil {
			continue
		}
		e := cloudevents.New()
		if e.UnmarshalJSON(b) != nil {
			// The decoder's own context of the error ("error found in #10
			// byte of ...|...|") is the member's, which the line says.
			msg, _, _ := strings.Cut(err.Error(), ", error found in #")
			return fmt.Errorf("%s: %q: %s", m.at, m.key, msg)
		}
	}
	return err
}

// readBinary reads an event in binary content mode written as header
// lines ("ce-id: 1", "content-type: application/json"), a blank line, and
// the data: HTTP's form (what curl -i prints), under the prefix "ce-" of
// the HTTP, NATS and Pub/Sub bindings or "ce_" of Kafka's, or the bare
// attribute names MQTT user properties carry. A structured content type
// makes the data the whole event, as every binding reads it. An HTTP
// status or request line first is skipped; other headers (Date,
// Content-Length) are not looked at. One newline after the data is not
// part of it.
func readBinary(data []byte) (*event, error) {
	headers := map[string]string{} // lower-cased names
	at := map[string]int{}         // and their lines
	var body string
	bodyLine, started := 0, false
	rest, more := string(data), true
	for line := 1; more; line++ {
		var l string
		l, rest, more = strings.Cut(rest, "\n")
		l = strings.TrimSuffix(l, "\r")
		switch {
		case len(headers) == 0 && !started && l == "":
			continue // blank lines before the headers
		case len(headers) == 0 && !started && isStartLine(l):
			started = true
			continue
		case l == "":
			body, bodyLine, more = rest, line+1, false
			continue
		case l[0] == ' ' || l[0] == '\t':
			return nil, fmt.Errorf("line %d: a header continued on a second line: write each header on one line", line)
		}
		name, value, ok := strings.Cut(l, ":")
		if !ok || !isToken(name) {
			return nil, fmt.Errorf("line %d: %q is not a header line (name: value) and not the blank line before the data", line, l)
		}
		key, value := strings.ToLower(name), strings.TrimSpace(value)
		if prev, ok := headers[key]; ok && prev != value {
			return nil, fmt.Errorf("line %d: %s again, with another value than on line %d: one attribute, two values", line, name, at[key])
		}
		headers[key], at[key] = value, line
	}
	body = strings.TrimSuffix(strings.TrimSuffix(body, "\n"), "\r")
	if strings.HasPrefix(strings.ToLower(headers[contentTypeHeader]), structuredType) {
		evt, err := readStructured([]byte(body), bodyLine)
		if err != nil {
			label := fmt.Sprintf("structured mode (content-type %s on line %d)", headers[contentTypeHeader], at[contentTypeHeader])
			return nil, &modeError{label, err}
		}
		return evt, nil
	}
	prefix, err := binaryPrefix(headers, at)
	if err != nil {
		return nil, err
	}
	attrs := map[string]string{}
	lines := map[string]string{}
	for key, v := range headers {
		name, ok := strings.CutPrefix(key, prefix)
		switch {
		case key == contentTypeHeader:
			attrs[key] = v
			lines["datacontenttype"] = fmt.Sprintf("line %d", at[key])
			continue
		case !ok, prefix == "" && !isAttributeName(name):
			continue // not an attribute: another header
		}
		attrs[binaryPrefixDash+name] = v
		lines[name] = fmt.Sprintf("line %d", at[key])
	}
	// The HTTP binding has datacontenttype in Content-Type; a dump may
	// have it as an attribute of its own too.
	if v, ok := attrs[binaryPrefixDash+"datacontenttype"]; ok {
		if ct, ok := attrs[contentTypeHeader]; ok && ct != v {
			return nil, fmt.Errorf("line %d: %sdatacontenttype %q and content-type %q (line %d): two datacontenttypes",
				at[prefix+"datacontenttype"], prefix, v, ct, at[contentTypeHeader])
		}
		attrs[contentTypeHeader] = v
		delete(attrs, binaryPrefixDash+"datacontenttype")
	}
	if bodyLine > 0 {
		lines["data"] = fmt.Sprintf("line %d", bodyLine)
	}
	sv := attrs[binaryPrefixDash+"specversion"]
	if sv != cloudevents.CloudEventsVersionV1 && sv != cloudevents.CloudEventsVersionV03 {
		// options.EventFromBinary builds no event for another version.
		if sv == "" {
			return nil, fmt.Errorf("no %sspecversion header: not a CloudEvent", prefix)
		}
		return nil, fmt.Errorf("%s: %sspecversion %q: want %s or %s", lines["specversion"], prefix, sv, cloudevents.CloudEventsVersionV1, cloudevents.CloudEventsVersionV03)
	}
	e, err := options.EventFromBinary(attrs, binaryPrefixDash, contentTypeHeader, []byte(body))
	if err != nil {
		return nil, validationError(err, lines, func(name string) string {
			if name == "datacontenttype" {
				return contentTypeHeader
			}
			return prefix + name
		})
	}
	return &event{Event: e, mode: modeBinary, at: lines}, nil
}

// The header names readBinary reads attributes under.
const (
	contentTypeHeader = "content-type"
	binaryPrefixDash  = "ce-"
)

// binaryPrefix returns the prefix of the attribute headers: "ce-", "ce_",
// or "" for MQTT's bare names.
func binaryPrefix(headers map[string]string, at map[string]int) (string, error) {
	var dash, underscore string
	for _, key := range slices.Sorted(maps.Keys(headers)) {
		switch {
		case strings.HasPrefix(key, "ce-") && dash == "":
			dash = key
		case strings.HasPrefix(key, "ce_") && underscore == "":
			underscore = key
		}
	}
	switch {
	case dash != "" && underscore != "":
		return "", fmt.Errorf("line %d: %s and %s (line %d): ce- and ce_ headers mixed; an event has one binding's prefix", at[underscore], underscore, dash, at[dash])
	case dash != "":
		return "ce-", nil
	case underscore != "":
		return "ce_", nil
	case headers["specversion"] != "":
		return "", nil
	}
	return "", errors.New(`no ce-specversion header (nor ce_specversion, nor specversion) and no content-type ` + structuredType + `: not a CloudEvent`)
}

// validationError returns err, an error of cloudevents' decoder or of
// Event.Validate, with each attribute it names at its place; header
// gives the name the input has for an attribute.
func validationError(err error, lines map[string]string, header func(string) string) error {
	var ve cloudevents.ValidationError
	if !errors.As(err, &ve) {
		// options.EventFromBinary's own: "ce-<name>: <cause>".
		for name, at := range lines {
			if cause, ok := strings.CutPrefix(err.Error(), binaryPrefixDash+name+": "); ok {
				return fmt.Errorf("%s: %s: %s", at, header(name), cause)
			}
		}
		return err
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(ve)) {
		attr := strings.TrimPrefix(name, "extension:")
		at, ok := lines[attr]
		if !ok {
			at, ok = lines[strings.ToLower(attr)]
		}
		if ok {
			errs = append(errs, fmt.Errorf("%s: %s: %v", at, header(attr), ve[name]))
		} else {
			errs = append(errs, fmt.Errorf("%s: %v", header(attr), ve[name]))
		}
	}
	return errors.Join(errs...)
}

// readProtobuf reads the gRPC transport's protobuf CloudEvent, as its
// Subscribe stream carries it, or a PublishRequest holding one, with
// options/grpc/protocol's FromProto, which reads OCM's attribute keys and
// the CloudEvents protobuf format's.
func readProtobuf(data []byte) (*event, error) {
	pbe := &protocol.CloudEvent{}
	err := proto.Unmarshal(data, pbe)
	if err != nil || pbe.GetSpecVersion() == "" {
		req := &protocol.PublishRequest{}
		if proto.Unmarshal(data, req) == nil && req.GetEvent().GetSpecVersion() != "" {
			pbe, err = req.GetEvent(), nil
		}
	}
	if err != nil {
		return nil, protoError(data, pbe, err)
	}
	e, err := protocol.FromProto(pbe)
	if err != nil {
		return nil, err
	}
	if err := e.Validate(); err != nil {
		return nil, validationError(err, nil, func(name string) string { return name })
	}
	return &event{Event: e, mode: modeProtobuf}, nil
}

// protoError returns err, proto.Unmarshal's of data into a message like m,
// with the offset of the first top-level field at fault: one that is not
// wire format, or that m does not take (a string that is not UTF-8, an
// attribute map entry that is no attribute value).
func protoError(data []byte, m proto.Message, err error) error {
	for off := 0; off < len(data); {
		num, typ, n := protowire.ConsumeTag(data[off:])
		if n < 0 {
			return fmt.Errorf("offset %d: %w", off, protowire.ParseError(n))
		}
		v := protowire.ConsumeFieldValue(num, typ, data[off+n:])
		if v < 0 {
			return fmt.Errorf("offset %d: field %d: %w", off, num, protowire.ParseError(v))
		}
		if ferr := proto.Unmarshal(data[off:off+n+v], m.ProtoReflect().New().Interface()); ferr != nil {
			return fmt.Errorf("offset %d: field %d: %w", off, num, ferr)
		}
		off += n + v
	}
	return err
}

// position returns "line L, column C" of byte offset in data, whose first
// line is firstLine.
func position(data []byte, offset, firstLine int) string {
	offset = min(max(offset, 0), len(data))
	before := data[:offset]
	line := firstLine + bytes.Count(before, []byte("\n"))
	col := utf8.RuneCount(before[bytes.LastIndexByte(before, '\n')+1:]) + 1
	return fmt.Sprintf("line %d, column %d", line, col)
}

// lineOf returns "line L" of byte offset in data.
func lineOf(data []byte, offset, firstLine int) string {
	return fmt.Sprintf("line %d", firstLine+bytes.Count(data[:min(offset, len(data))], []byte("\n")))
}
