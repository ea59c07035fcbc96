package types

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// ResourceVersion is one entry of a spec resync request: a resource the
// agent holds and the version it holds.
type ResourceVersion struct {
	ResourceID      string `json:"resourceID"`
	ResourceVersion int64  `json:"resourceVersion"`
}

// UnmarshalJSON accepts resourceVersion as a JSON number or a decimal string
// (seed 000 shows it as a string).
func (r *ResourceVersion) UnmarshalJSON(data []byte) error {
	var raw struct {
		ResourceID      string          `json:"resourceID"`
		ResourceVersion json.RawMessage `json:"resourceVersion"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	if raw.ResourceID == "" {
		return errors.New("resourceID: missing")
	}
	v, err := parseJSONInt(raw.ResourceVersion)
	if err != nil {
		return fmt.Errorf("resource %q: resourceVersion: %w", raw.ResourceID, err)
	}
	r.ResourceID, r.ResourceVersion = raw.ResourceID, v
	return nil
}

// ResourceVersionList is the payload of a spec resync request. An empty list
// asks for every resource.
type ResourceVersionList struct {
	ResourceVersions []ResourceVersion `json:"resourceVersions"`
}

// StatusHash is one entry of a status resync request: a resource the source
// holds and the hash of the status it holds (see generic.StatusHash).
type StatusHash struct {
	ResourceID string `json:"resourceID"`
	StatusHash string `json:"statusHash"`
}

// StatusHashList is the payload of a status resync request. An empty list
// asks for the status of every resource.
type StatusHashList struct {
	StatusHashes []StatusHash `json:"statusHashes"`
}

// DecodeResourceVersionList decodes a spec resync payload. Empty data is an
// empty list.
func DecodeResourceVersionList(data []byte) (ResourceVersionList, error) {
	var l ResourceVersionList
	if len(bytes.TrimSpace(data)) == 0 {
		return l, nil
	}
	if fast, ok := fastResourceVersions(data); ok {
		return fast, nil
	}
	if err := json.Unmarshal(data, &l); err != nil {
		return ResourceVersionList{}, fmt.Errorf("decode spec resync payload: %w", err)
	}
	return l, nil
}

// DecodeStatusHashList decodes a status resync payload. Empty data is an
// empty list.
func DecodeStatusHashList(data []byte) (StatusHashList, error) {
	var l StatusHashList
	if len(bytes.TrimSpace(data)) == 0 {
		return l, nil
	}
	if fast, ok := fastStatusHashes(data); ok {
		return fast, nil
	}
	if err := json.Unmarshal(data, &l); err != nil {
		return StatusHashList{}, fmt.Errorf("decode status resync payload: %w", err)
	}
	for i, h := range l.StatusHashes {
		if h.ResourceID == "" {
			return StatusHashList{}, fmt.Errorf("decode status resync payload: statusHashes[%d]: resourceID: missing", i)
		}
	}
	return l, nil
}

func parseJSONInt(raw json.RawMessage) (int64, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return 0, errors.New("missing")
	}
	s := string(raw)
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, err
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("want an integer: %w", err)
	}
	return n, nil
}

// Batch limits: brokers cap packet size (Azure Event Grid's MQTT at 512 KiB),
// so a resync of thousands of resources goes out in several events.
const (
	// MaxBatchEntries is the most entries one resync event carries.
	MaxBatchEntries = 1000
	// MaxBatchBytes bounds the encoded entries of one resync event, well under
	// 256 KiB so that headers and the CloudEvents envelope still fit.
	MaxBatchBytes = 192 << 10
)

// Batches splits entries into consecutive batches of at most maxEntries
// entries whose sizes (as size reports them) sum to at most maxBytes. An
// entry larger than maxBytes gets a batch of its own. Batches share the
// backing array of entries. No entries gives no batches.
func Batches[E any](entries []E, maxEntries, maxBytes int, size func(E) int) [][]E {
	if maxEntries <= 0 {
		maxEntries = MaxBatchEntries
	}
	if maxBytes <= 0 {
		maxBytes = MaxBatchBytes
	}
	var out [][]E
	start, bytes := 0, 0
	for i, e := range entries {
		n := size(e)
		if i > start && (i-start >= maxEntries || bytes+n > maxBytes) {
			out = append(out, entries[start:i:i])
			start, bytes = i, 0
		}
		bytes += n
	}
	if start < len(entries) {
		out = append(out, entries[start:])
	}
	return out
}

// ResourceVersionSize is the encoded size of one spec resync entry, for Batches.
func ResourceVersionSize(r ResourceVersion) int {
	return len(`{"resourceID":"","resourceVersion":},`) + len(r.ResourceID) + 20
}

// StatusHashSize is the encoded size of one status resync entry, for Batches.
func StatusHashSize(h StatusHash) int {
	return len(`{"resourceID":"","statusHash":""},`) + len(h.ResourceID) + len(h.StatusHash)
}
