package generic

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// StatusHash returns the hash status resync compares: the hex SHA-256 of the
// JSON of status as an unstructured map, whose keys encoding/json sorts. Two
// peers that never shared code agree on it as long as both hash the same
// status object (for ManifestWork, its .status).
func StatusHash(status any) (string, error) {
	raw, err := json.Marshal(status)
	if err != nil {
		return "", fmt.Errorf("status hash: %w", err)
	}
	// Re-encode through a generic value so object keys come out sorted;
	// UseNumber keeps integers exact.
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return "", fmt.Errorf("status hash: %w", err)
	}
	sorted, err := json.Marshal(generic)
	if err != nil {
		return "", fmt.Errorf("status hash: %w", err)
	}
	sum := sha256.Sum256(sorted)
	return hex.EncodeToString(sum[:]), nil
}
