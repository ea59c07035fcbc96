package server_test

import (
	"testing"

	"github.com/workwire/sdk-go/internal/ack"
	"github.com/workwire/sdk-go/options/grpc/server"
)

// DefaultSpecResendAfter is written out in the server's package, for its
// documentation, and is internal/ack's, as the clients' is.
func TestDefaultSpecResendAfterIsAcks(t *testing.T) {
	t.Parallel()
	if server.DefaultSpecResendAfter != ack.DefaultAfter {
		t.Errorf("server.DefaultSpecResendAfter %v differs from internal/ack's %v", server.DefaultSpecResendAfter, ack.DefaultAfter)
	}
}
