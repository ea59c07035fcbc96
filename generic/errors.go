package generic

import (
	"errors"
	"fmt"

	"github.com/workwire/sdk-go/options"
)

// Errors the clients return (wrapped, test with errors.Is).
var (
	// ErrStarted is returned by Start called twice and by Subscribe after Start.
	ErrStarted = errors.New("client already started")
	// ErrNotStarted is returned by Publish and Resync before Start.
	ErrNotStarted = errors.New("client not started")
	// ErrClosed is returned by calls after Close.
	ErrClosed = errors.New("client closed")
	// ErrUnknownDataType is returned for a data type no codec handles.
	ErrUnknownDataType = errors.New("no codec for data type")
	// ErrWrongEventType is returned by Publish for an event type the client's
	// side does not send (a source sends spec events, an agent status events).
	ErrWrongEventType = errors.New("event type not sent by this side")
	// ErrEncode is returned by Publish when the codec cannot make an event
	// of the resource, or makes one without what its route needs (the
	// cluster name of a spec, the original source of a status). Publishing
	// the same resource again fails the same way.
	ErrEncode = errors.New("cannot encode the resource")
)

// Permanent reports whether err, from Publish, is one that sending the
// same object again cannot fix: the event is larger than the transport or
// its broker takes (options.ErrTooLarge), the codec cannot encode the
// object (ErrEncode) or encoded it as no valid CloudEvent
// (options.ErrInvalidEvent), or the object's cluster names no route
// (options.ErrInvalidRoute). Resync cannot deliver such an object either:
// it stays undelivered until it changes. Anything else (not connected, a
// broker that failed, a timeout) may pass on a later try.
func Permanent(err error) bool {
	return errors.Is(err, options.ErrTooLarge) || errors.Is(err, ErrEncode) ||
		errors.Is(err, options.ErrInvalidEvent) || errors.Is(err, options.ErrInvalidRoute)
}

// DecodeError is a received event that could not be used: its type, an
// extension or its payload was malformed. The client logs it, counts it and
// skips the event.
type DecodeError struct {
	EventID   string
	EventType string
	Err       error
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("decode event %q of type %q: %v", e.EventID, e.EventType, e.Err)
}

// Unwrap returns the cause.
func (e *DecodeError) Unwrap() error { return e.Err }
