package types

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	cetypes "github.com/cloudevents/sdk-go/v2/types"
)

// CloudEvents extension attribute names of the wire contract.
const (
	// ExtResourceID is the resource's unique ID (required).
	ExtResourceID = "resourceid"
	// ExtResourceVersion is the resource's version on the source, strictly
	// increasing (required on spec events; emitted as an integer).
	ExtResourceVersion = "resourceversion"
	// ExtClusterName is the cluster a resource is for or from.
	ExtClusterName = "clustername"
	// ExtDeletionTimestamp marks a resource the source is deleting (RFC 3339, UTC).
	ExtDeletionTimestamp = "deletiontimestamp"
	// ExtMetadata carries the resource's ObjectMeta as JSON on spec events.
	ExtMetadata = "metadata"
	// ExtOriginalSource names the source a status event belongs to.
	ExtOriginalSource = "originalsource"
	// ExtSequenceID is strictly increasing per agent (a decimal string), so a
	// source can drop status events that arrive out of order.
	ExtSequenceID = "sequenceid"

	// ExtResyncID groups the batches of one resync request.
	ExtResyncID = "resyncid"
	// ExtResyncBatch is the 0-based index of a batch within its resync.
	ExtResyncBatch = "resyncbatch"
	// ExtResyncBatches is how many batches the resync has.
	ExtResyncBatches = "resyncbatches"
)

// ErrExtension is wrapped by every error the extension getters return.
var ErrExtension = errors.New("invalid cloudevents extension")

// ExtensionError says which extension of which event was missing or
// ill-typed.
type ExtensionError struct {
	Name    string // extension name
	EventID string
	Err     error
}

func (e *ExtensionError) Error() string {
	return fmt.Sprintf("event %q: extension %q: %v", e.EventID, e.Name, e.Err)
}

// Unwrap returns the cause.
func (e *ExtensionError) Unwrap() []error { return []error{ErrExtension, e.Err} }

var errMissing = errors.New("missing")

// Missing returns the error of evt lacking required extension name, as
// RequiredString and RequiredInt64 return it: for a reader of a parsed
// Header.
func Missing(evt *cloudevents.Event, name string) error { return extErr(evt, name, errMissing) }

// IsMissing reports whether err says a required extension was absent.
func IsMissing(err error) bool { return errors.Is(err, errMissing) }

// Extension returns an extension's raw value; ok is false when it is absent.
func Extension(evt *cloudevents.Event, name string) (value any, ok bool) { return lookup(evt, name) }

// lookup returns an extension's value.
func lookup(evt *cloudevents.Event, name string) (any, bool) {
	v := extensions(evt)[name]
	return v, v != nil
}

// extensions returns evt's extensions. It reads a CloudEvents 1.0
// context's map in place: Event.Extensions copies the whole map per call,
// which was a sixth of a codec's decode time.
func extensions(evt *cloudevents.Event) map[string]any {
	switch c := evt.Context.(type) {
	case *cloudevents.EventContextV1:
		return c.Extensions
	case nil:
		return nil
	default:
		return c.GetExtensions()
	}
}

func extErr(evt *cloudevents.Event, name string, err error) error {
	return &ExtensionError{Name: name, EventID: evt.ID(), Err: err}
}

// StringExtension returns a string extension. ok is false when it is absent.
func StringExtension(evt *cloudevents.Event, name string) (value string, ok bool, err error) {
	v, found := lookup(evt, name)
	if !found {
		return "", false, nil
	}
	if value, err = asString(v); err != nil {
		return "", true, extErr(evt, name, err)
	}
	return value, true, nil
}

// RequiredString returns a string extension that must be present and non-empty.
func RequiredString(evt *cloudevents.Event, name string) (string, error) {
	s, ok, err := StringExtension(evt, name)
	if err != nil {
		return "", err
	}
	if !ok || s == "" {
		return "", extErr(evt, name, errMissing)
	}
	return s, nil
}

// Int64Extension returns an integer extension, accepting a CloudEvents
// integer or a decimal string (the MQTT binding carries every attribute as a
// string). Fractions, junk and values beyond int64 are errors. ok is false
// when it is absent.
func Int64Extension(evt *cloudevents.Event, name string) (value int64, ok bool, err error) {
	v, found := lookup(evt, name)
	if !found {
		return 0, false, nil
	}
	if value, err = asInt64(v); err != nil {
		return 0, true, extErr(evt, name, err)
	}
	return value, true, nil
}

// RequiredInt64 returns an integer extension that must be present.
func RequiredInt64(evt *cloudevents.Event, name string) (int64, error) {
	n, ok, err := Int64Extension(evt, name)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, extErr(evt, name, errMissing)
	}
	return n, nil
}

// SetInt32Extension sets an integer extension, which CloudEvents limits to
// 32 bits: larger values are an error, never truncated.
func SetInt32Extension(evt *cloudevents.Event, name string, n int64) error {
	if n > math.MaxInt32 || n < math.MinInt32 {
		return extErr(evt, name, fmt.Errorf("%d does not fit a CloudEvents integer (32 bits)", n))
	}
	evt.SetExtension(name, int32(n))
	return nil
}

// TimeExtension returns a timestamp extension (a CloudEvents timestamp or an
// RFC 3339 string). ok is false when it is absent.
func TimeExtension(evt *cloudevents.Event, name string) (value time.Time, ok bool, err error) {
	v, found := lookup(evt, name)
	if !found {
		return time.Time{}, false, nil
	}
	if value, err = asTime(v); err != nil {
		return time.Time{}, true, extErr(evt, name, err)
	}
	return value, true, nil
}

// SequenceID reads the optional sequenceid extension: a decimal string (the
// MQTT binding carries every attribute as a string), or a CloudEvents
// integer from peers that send one. ok is false when it is absent.
func SequenceID(evt *cloudevents.Event) (value uint64, ok bool, err error) {
	v, found := lookup(evt, ExtSequenceID)
	if !found {
		return 0, false, nil
	}
	if value, err = asSequence(v); err != nil {
		return 0, false, extErr(evt, ExtSequenceID, err)
	}
	return value, true, nil
}

// asString, asInt64, asTime and asSequence read an extension's value as the
// getters above describe; their errors say what was wanted, and the caller
// names the extension.
func asString(v any) (string, error) {
	s, err := cetypes.ToString(v)
	if err != nil {
		return "", fmt.Errorf("want a string, got %T", v)
	}
	return s, nil
}

func asInt64(v any) (int64, error) {
	switch v := v.(type) {
	case int32:
		return int64(v), nil
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("want a decimal integer: %w", err)
		}
		return n, nil
	case float64: // JSON numbers decoded outside the SDK's own format
		// 2^63 itself rounds to MaxInt64 as a float64 and would overflow.
		if v != math.Trunc(v) || v >= math.MaxInt64 || v < math.MinInt64 {
			return 0, fmt.Errorf("want an integer, got %v", v)
		}
		return int64(v), nil
	default:
		return 0, fmt.Errorf("want an integer, got %T", v)
	}
}

func asTime(v any) (time.Time, error) {
	switch v := v.(type) {
	case cetypes.Timestamp:
		return v.Time.UTC(), nil
	case *cetypes.Timestamp:
		return v.Time.UTC(), nil
	case time.Time:
		return v.UTC(), nil
	case string:
		t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(v))
		if err != nil {
			return time.Time{}, fmt.Errorf("want an RFC 3339 time: %w", err)
		}
		return t.UTC(), nil
	default:
		return time.Time{}, fmt.Errorf("want a timestamp, got %T", v)
	}
}

func asSequence(v any) (uint64, error) {
	switch v := v.(type) {
	case string:
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("want a decimal integer: %w", err)
		}
		return n, nil
	case int32:
		if v < 0 {
			return 0, fmt.Errorf("negative: %d", v)
		}
		return uint64(v), nil
	default:
		return 0, fmt.Errorf("want a decimal string, got %T", v)
	}
}

// SetTimeExtension sets a timestamp extension in UTC.
func SetTimeExtension(evt *cloudevents.Event, name string, t time.Time) {
	evt.SetExtension(name, cetypes.Timestamp{Time: t.UTC()})
}
