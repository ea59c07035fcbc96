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
	// OriginalSource names the source the agent attributes the resource to,
	// in a request whose entries belong to several sources; otherwise the
	// event's originalsource extension names it for every entry (see
	// EntrySource). OCM peers ignore it.
	OriginalSource string `json:"originalSource,omitempty"`
}

// UnmarshalJSON accepts resourceVersion as a JSON number or a decimal string
// (some peers send a string).
func (r *ResourceVersion) UnmarshalJSON(data []byte) error {
	var raw struct {
		ResourceID      string          `json:"resourceID"`
		ResourceVersion json.RawMessage `json:"resourceVersion"`
		OriginalSource  string          `json:"originalSource"`
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
	r.ResourceID, r.ResourceVersion, r.OriginalSource = raw.ResourceID, v, raw.OriginalSource
	return nil
}

// EntrySource returns the source a spec resync entry belongs to: its own
// OriginalSource, or else eventSource, the originalsource extension of the
// event that carried it. "" means the agent does not know (OCM agents send
// an empty originalsource).
func (r ResourceVersion) EntrySource(eventSource string) string {
	if r.OriginalSource != "" {
		return r.OriginalSource
	}
	return eventSource
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

// A resync request goes out as one event: OCM peers read each request as
// the sender's complete list. Only a transport that knows its size limit
// (configured, or announced by the broker: Azure Event Grid's MQTT caps
// packets at 512 KiB) has it split into batches that fit.

// ResyncEnvelopeBytes is what a resync event's attributes, extensions and
// the JSON around its entries may take beside the entries (see BatchBytes).
const ResyncEnvelopeBytes = 4 << 10

// BatchBytes returns how many bytes of entries one resync event may carry
// on a transport whose events are limited to limit bytes: limit less
// ResyncEnvelopeBytes, and at least half of limit. A limit of 0 (unknown)
// gives 0: one event, however large.
func BatchBytes(limit int) int {
	if limit <= 0 {
		return 0
	}
	return max(limit-ResyncEnvelopeBytes, limit/2)
}

// Batches splits entries into consecutive batches whose sizes (as size
// reports them) sum to at most maxBytes; maxBytes <= 0 keeps them in one
// batch. An entry larger than maxBytes gets a batch of its own. Batches
// share the backing array of entries. No entries gives no batches.
func Batches[E any](entries []E, maxBytes int, size func(E) int) [][]E {
	if len(entries) == 0 {
		return nil
	}
	if maxBytes <= 0 {
		return [][]E{entries}
	}
	var out [][]E
	start, bytes := 0, 0
	for i, e := range entries {
		n := size(e)
		if i > start && bytes+n > maxBytes {
			out = append(out, entries[start:i:i])
			start, bytes = i, 0
		}
		bytes += n
	}
	return append(out, entries[start:])
}

// ResourceVersionSize is the encoded size of one spec resync entry, for Batches.
func ResourceVersionSize(r ResourceVersion) int {
	n := len(`{"resourceID":"","resourceVersion":},`) + len(r.ResourceID) + 20
	if r.OriginalSource != "" {
		n += len(`,"originalSource":""`) + len(r.OriginalSource)
	}
	return n
}

// StatusHashSize is the encoded size of one status resync entry, for Batches.
func StatusHashSize(h StatusHash) int {
	return len(`{"resourceID":"","statusHash":""},`) + len(h.ResourceID) + len(h.StatusHash)
}
