package server_test

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc/grpctest"
	"github.com/workwire/sdk-go/options/grpc/server"
)

// HTTP/2 frame types and flags (RFC 9113) that the keep-alive tests use.
const (
	frameSettings = 0x4
	framePing     = 0x6
	frameGoAway   = 0x7
	flagAck       = 0x1

	errEnhanceYourCalm = 0xb
)

type frame struct {
	typ, flags byte
	payload    []byte
}

// h2conn is a bare HTTP/2 client connection: enough to send pings and see
// what the gRPC server answers, which no gRPC client lets a test control.
type h2conn struct {
	t *testing.T
	c net.Conn
}

func dialH2(t *testing.T, addr string) *h2conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	h := &h2conn{t: t, c: c}
	if _, err := io.WriteString(c, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	h.write(frameSettings, 0, nil)
	// Everything below is bounded: a test never hangs on a silent server.
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	return h
}

func (h *h2conn) write(typ, flags byte, payload []byte) {
	h.t.Helper()
	hdr := make([]byte, 9, 9+len(payload))
	hdr[0], hdr[1], hdr[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	hdr[3], hdr[4] = typ, flags
	if _, err := h.c.Write(append(hdr, payload...)); err != nil {
		h.t.Fatalf("write frame %d: %v", typ, err)
	}
}

func (h *h2conn) ping(n uint64) {
	h.t.Helper()
	h.write(framePing, 0, binary.BigEndian.AppendUint64(nil, n))
}

// read returns the next frame, acknowledging the server's settings on the
// way; an error when the connection ends.
func (h *h2conn) read() (frame, error) {
	for {
		hdr := make([]byte, 9)
		if _, err := io.ReadFull(h.c, hdr); err != nil {
			return frame{}, err
		}
		f := frame{typ: hdr[3], flags: hdr[4], payload: make([]byte, int(hdr[0])<<16|int(hdr[1])<<8|int(hdr[2]))}
		if _, err := io.ReadFull(h.c, f.payload); err != nil {
			return frame{}, err
		}
		if f.typ == frameSettings && f.flags&flagAck == 0 {
			h.write(frameSettings, flagAck, nil)
			continue
		}
		return f, nil
	}
}

// With the default policy a client pinging far more often than
// MinClientPingInterval is disconnected ("too many pings").
func TestServerEnforcesClientPingInterval(t *testing.T) {
	srv := grpctest.NewServer(t)
	h := dialH2(t, srv.Addr())
	for i := range 5 {
		h.ping(uint64(i))
	}
	for {
		f, err := h.read()
		if err != nil {
			t.Fatalf("the connection ended without a GOAWAY: %v", err)
		}
		if f.typ != frameGoAway {
			continue
		}
		if len(f.payload) < 8 {
			t.Fatalf("short GOAWAY %x", f.payload)
		}
		if code, debug := binary.BigEndian.Uint32(f.payload[4:8]), string(f.payload[8:]); code != errEnhanceYourCalm || debug != "too_many_pings" {
			t.Errorf("GOAWAY code %#x %q, want ENHANCE_YOUR_CALM too_many_pings", code, debug)
		}
		return
	}
}

// The server's enforcement policy is the configured one, not gRPC's
// default (pings at most every 5 minutes, none without a stream): with a
// minimum interval of 1ns, a burst of pings on a connection without
// streams is answered, not punished.
func TestServerPingPolicyIsConfigured(t *testing.T) {
	srv := grpctest.NewServerWithConfig(t, server.Config{MinClientPingInterval: options.Duration(time.Nanosecond)})
	h := dialH2(t, srv.Addr())
	const n = 10
	for i := range n {
		h.ping(uint64(i))
	}
	acks := 0
	for acks < n {
		f, err := h.read()
		if err != nil {
			t.Fatalf("the connection ended after %d ping answers: %v", acks, err)
		}
		switch {
		case f.typ == frameGoAway:
			t.Fatalf("GOAWAY after %d ping answers: %q", acks, f.payload[min(8, len(f.payload)):])
		case f.typ == framePing && f.flags&flagAck != 0:
			acks++
		}
	}
}

// The server pings a silent connection after its KeepAliveTime (gRPC's
// floor for servers is 1s).
func TestServerPingsIdleConnections(t *testing.T) {
	srv := grpctest.NewServerWithConfig(t, server.Config{KeepAliveTime: options.Duration(time.Second)})
	h := dialH2(t, srv.Addr())
	for {
		f, err := h.read()
		if err != nil {
			t.Fatalf("no keep-alive ping before the connection ended: %v", err)
		}
		if f.typ == framePing && f.flags&flagAck == 0 {
			h.write(framePing, flagAck, f.payload)
			return
		}
	}
}
