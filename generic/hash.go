package generic

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/workwire/sdk-go/internal/jsonscan"
)

// StatusHash returns the hash status resync compares: the hex SHA-256 of the
// JSON of status as an unstructured map, whose keys encoding/json sorts. Two
// peers that never shared code agree on it as long as both hash the same
// status object (for ManifestWork, its .status). It is goroutine-safe.
func StatusHash(status any) (string, error) {
	raw, err := json.Marshal(status)
	if err != nil {
		return "", fmt.Errorf("status hash: %w", err)
	}
	// The same bytes as decoding raw into an any (UseNumber) and encoding
	// that again, in one pass.
	sorted, err := jsonscan.AppendCanonical(make([]byte, 0, len(raw)), raw)
	if err != nil {
		return "", fmt.Errorf("status hash: %w", err)
	}
	sum := sha256.Sum256(sorted)
	return hex.EncodeToString(sum[:]), nil
}
