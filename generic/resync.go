package generic

import (
	"errors"

	"github.com/workwire/sdk-go/generic/types"
)

// sessionKey is what a client answers resync requests per: the peer (a
// cluster, or a source) and the data type.
type sessionKey struct {
	peer string
	dt   types.DataType
}

// malformed wraps err as a drop the client will not retry.
func malformed(err error) error {
	return &dropError{reason: DropMalformed, err: err}
}

var errNoResourceID = errors.New("object has no UID")
