package protocol

import (
	"fmt"

	"google.golang.org/grpc/encoding/gzip" // registers gzip: every workwire server reads what compressing clients send
)

// Gzip is the one compression a workwire client or server can be told to
// use: gzip, as grpc-go ships it.
const Gzip = gzip.Name

// CheckCompression returns an error unless name, the value of the config
// field key, is "" (no compression) or Gzip.
func CheckCompression(key, name string) error {
	if name != "" && name != Gzip {
		return fmt.Errorf("%s %q: want %q or \"\" (none)", key, name, Gzip)
	}
	return nil
}
