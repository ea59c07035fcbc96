package transporttest

import (
	"net"
	"testing"
)

// ClosedAddr returns a loopback host:port that nothing listens on, for a
// transport (or a program) whose broker cannot be reached.
func ClosedAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}
