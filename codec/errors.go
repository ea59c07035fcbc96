package codec

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/workwire/sdk-go/generic/types"
)

// Sentinels wrapped by the errors Encode and Decode return; test with errors.Is.
var (
	// ErrUnsupportedType means the event type is not one the codec handles: a
	// foreign data type, a resync_request (the clients handle those), or a
	// status event whose action is not update_request (Encode only).
	ErrUnsupportedType = errors.New("event type not handled by this codec")
	// ErrNoOriginalSource means Encode was asked for the status of a work
	// (or object) without the OriginalSourceAnnotation: one that did not
	// come from a source through Decode.
	ErrNoOriginalSource = errors.New("no " + OriginalSourceAnnotation + " annotation: it did not come from a source")
)

// Error is the error Encode and Decode return for a work or an event they
// cannot handle. It says which operation failed on which event, and where:
// Field is an extension ("extension resourceversion"), an attribute, or a
// path into the data ("data: manifests[2]"). Extension errors also wrap
// types.ErrExtension, event type errors types.ErrInvalidType or
// ErrUnsupportedType, JSON errors the encoding/json error.
type Error struct {
	// Op is "encode" or "decode".
	Op string
	// EventType is the CloudEvents type, as given to Encode or received.
	EventType string
	// EventID is the CloudEvents id of a decoded event; empty on encode.
	EventID string
	// Work is "namespace/name" of the work (or, from an ObjectCodec, the
	// object) Encode was given; empty on decode.
	Work string
	// Field says where the problem is; empty if it is the event as a whole.
	Field string
	// Err is the cause.
	Err error

	noun string // what Work names, if not a work: an ObjectCodec's kind
}

// Error formats e as "<op> <event type> event "<id>" of work "<ns/name>": <field>: <cause>",
// leaving out the parts that are empty.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Op)
	if e.EventType != "" {
		b.WriteString(" ")
		b.WriteString(e.EventType)
	}
	b.WriteString(" event")
	if e.EventID != "" {
		fmt.Fprintf(&b, " %q", e.EventID)
	}
	if e.Work != "" {
		noun := e.noun
		if noun == "" {
			noun = "work"
		}
		fmt.Fprintf(&b, " of %s %q", noun, e.Work)
	}
	b.WriteString(": ")
	cause := e.Err
	// types.ExtensionError repeats the event ID: print its parts only.
	var ext *types.ExtensionError
	if errors.As(cause, &ext) && e.Field == "" {
		fmt.Fprintf(&b, "extension %q: %v", ext.Name, ext.Err)
		return b.String()
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	if cause != nil {
		b.WriteString(cause.Error())
	} else {
		b.WriteString("unknown error")
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// jsonError adds the byte offset to a JSON syntax error, which
// encoding/json leaves out of the message.
func jsonError(err error) error {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return fmt.Errorf("invalid JSON at offset %d: %w", syn.Offset, err)
	}
	return err
}
