package transporttest

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"golang.org/x/net/http2/hpack"
)

// gRPC frames HTTP/2 in cleartext with prior knowledge (h2c), as grpc-go
// dials without TLS: the client's connection preface, then frames both ways.
type grpcProtocol struct{}

func (grpcProtocol) NewConn() ProtocolConn {
	c := &grpcConn{streams: make(map[uint32]bool), tableSize: h2DefaultTableSize}
	c.dec = hpack.NewDecoder(h2DefaultTableSize, func(f hpack.HeaderField) {
		if f.Name == ":path" {
			c.path = f.Value
		}
	})
	c.dec.SetMaxStringLength(h2MaxHeaderBlock)
	return c
}

// HTTP/2 (RFC 9113) as the framing needs it.
const (
	h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

	h2Data         = 0x0
	h2Headers      = 0x1
	h2RSTStream    = 0x3
	h2Settings     = 0x4
	h2PushPromise  = 0x5
	h2WindowUpdate = 0x8
	h2Continuation = 0x9

	h2EndStream  = 0x1 // DATA, HEADERS
	h2Ack        = 0x1 // SETTINGS
	h2EndHeaders = 0x4
	h2Padded     = 0x8
	h2Priority   = 0x20

	h2SettingsHeaderTableSize = 0x1
	h2DefaultTableSize        = 4096
)

// h2MaxHeaderBlock bounds a header block, CONTINUATION frames and all:
// grpc-go's default limit on a header list.
const h2MaxHeaderBlock = 16 << 20

// subscribeMethod ends the :path of the calls whose streams go deaf: the
// CloudEvents service's Subscribe (options/grpc/protocol.SubscribeMethod),
// or any other service's of that name.
const subscribeMethod = "/Subscribe"

type grpcConn struct {
	// The client's goroutine alone uses these. Every header block the
	// client sends goes through dec, in order: HPACK's dynamic table is the
	// state of the whole connection.
	prefaced bool
	dec      *hpack.Decoder
	block    uint32 // stream whose header block CONTINUATION frames go on with; 0: none
	blockLen int    // bytes of that header block so far
	path     string // its :path so far

	mu        sync.Mutex
	streams   map[uint32]bool // open Subscribe streams, to whether they are deaf
	told      bool            // Deafen told the connection which streams to deafen (deafen)
	tableSize uint32          // the largest dynamic table the server lets the client's encoder have

	dropped bool // the broker's goroutine alone: whether its last frame was dropped
}

func (c *grpcConn) deafen() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.told = true
	c.deafenOpen()
}

// deafenOpen makes every open Subscribe stream deaf. c.mu is held.
func (c *grpcConn) deafenOpen() {
	for id := range c.streams {
		c.streams[id] = true
	}
}

func (c *grpcConn) droppedLast() bool { return c.dropped }

func (c *grpcConn) FromClient(r *bufio.Reader) ([]byte, error) {
	if !c.prefaced {
		b := make([]byte, len(h2Preface))
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		if string(b) != h2Preface {
			return nil, errors.New("transporttest: grpc: the client did not open with HTTP/2's connection preface")
		}
		c.prefaced = true
		return b, nil
	}
	f, err := readH2Frame(r)
	if err != nil {
		return nil, err
	}
	if c.block != 0 && (f.typ != h2Continuation || f.stream != c.block) {
		return nil, fmt.Errorf("transporttest: grpc: frame of type %d on stream %d inside the header block of stream %d", f.typ, f.stream, c.block)
	}
	switch f.typ {
	case h2Headers:
		if f.stream == 0 {
			return nil, errors.New("transporttest: grpc: HEADERS on stream 0")
		}
		fragment, err := headersFragment(f)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		size := c.tableSize
		c.mu.Unlock()
		c.dec.SetAllowedMaxDynamicTableSize(size)
		c.block, c.blockLen, c.path = f.stream, 0, ""
		if err := c.headerBlock(fragment, f.flags&h2EndHeaders != 0); err != nil {
			return nil, err
		}
	case h2Continuation:
		if c.block == 0 {
			return nil, fmt.Errorf("transporttest: grpc: CONTINUATION on stream %d outside a header block", f.stream)
		}
		if err := c.headerBlock(f.payload, f.flags&h2EndHeaders != 0); err != nil {
			return nil, err
		}
	case h2RSTStream:
		c.mu.Lock()
		delete(c.streams, f.stream)
		c.mu.Unlock()
	case h2PushPromise:
		return nil, errors.New("transporttest: grpc: PUSH_PROMISE from a client")
	}
	return f.raw, nil
}

// headerBlock decodes the next fragment of the header block of c.block,
// the last if end, and then notes a call to a Subscribe method.
func (c *grpcConn) headerBlock(fragment []byte, end bool) error {
	c.blockLen += len(fragment)
	if c.blockLen > h2MaxHeaderBlock {
		return fmt.Errorf("transporttest: grpc: header block of stream %d over %d bytes", c.block, h2MaxHeaderBlock)
	}
	if _, err := c.dec.Write(fragment); err != nil {
		return fmt.Errorf("transporttest: grpc: header block of stream %d: %w", c.block, err)
	}
	if !end {
		return nil
	}
	stream := c.block
	c.block = 0
	if err := c.dec.Close(); err != nil {
		return fmt.Errorf("transporttest: grpc: header block of stream %d: %w", stream, err)
	}
	if strings.HasSuffix(c.path, subscribeMethod) {
		c.mu.Lock()
		if _, ok := c.streams[stream]; !ok {
			c.streams[stream] = false
		}
		c.mu.Unlock()
	}
	return nil
}

func (c *grpcConn) FromBroker(r *bufio.Reader, deaf bool) (toClient, toBroker []byte, err error) {
	c.dropped = false
	f, err := readH2Frame(r)
	if err != nil {
		return nil, nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if deaf && !c.told {
		// Used without a Proxy, which says when Deafen ran: the streams
		// open at the first deaf frame are those Deafen would have found.
		c.told = true
		c.deafenOpen()
	}
	switch f.typ {
	case h2Data:
		if f.stream == 0 {
			return nil, nil, errors.New("transporttest: grpc: DATA on stream 0")
		}
		if f.flags&h2Padded != 0 && (len(f.payload) == 0 || int(f.payload[0]) >= len(f.payload)) {
			return nil, nil, fmt.Errorf("transporttest: grpc: DATA on stream %d padded beyond its length", f.stream)
		}
		end := f.flags&h2EndStream != 0
		drop := deaf && c.streams[f.stream]
		if end {
			delete(c.streams, f.stream)
		}
		if !drop {
			return f.raw, nil, nil
		}
		c.dropped = true
		if end {
			// The stream still ends for the client; only its data is lost.
			toClient = h2FrameHead(h2Data, h2EndStream, f.stream, 0)
		}
		// The client never saw these bytes, so it never gives the server
		// the flow-control window they took back; the proxy does, or the
		// server's windows would run dry and hold up every stream.
		if n := len(f.payload); n > 0 {
			if !end {
				toBroker = h2WindowUpdateFrame(f.stream, n)
			}
			toBroker = append(toBroker, h2WindowUpdateFrame(0, n)...)
		}
		return toClient, toBroker, nil
	case h2Headers:
		if f.flags&h2EndStream != 0 {
			delete(c.streams, f.stream)
		}
	case h2RSTStream:
		delete(c.streams, f.stream)
	case h2Settings:
		if f.flags&h2Ack != 0 {
			break
		}
		if len(f.payload)%6 != 0 {
			return nil, nil, fmt.Errorf("transporttest: grpc: SETTINGS of %d bytes, not a multiple of 6", len(f.payload))
		}
		for s := f.payload; len(s) > 0; s = s[6:] {
			// The client's encoder may grow its table up to this. Never
			// lowered: a header block encoded before the client saw a
			// lower one may still be on its way.
			if binary.BigEndian.Uint16(s) == h2SettingsHeaderTableSize {
				c.tableSize = max(c.tableSize, binary.BigEndian.Uint32(s[2:]))
			}
		}
	}
	return f.raw, nil, nil
}

type h2Frame struct {
	typ, flags byte
	stream     uint32
	raw        []byte // the whole frame
	payload    []byte // raw after the header
}

// readH2Frame reads a frame: a 24-bit length, type, flags, a reserved bit
// and a 31-bit stream ID, then length bytes of payload.
func readH2Frame(r io.Reader) (h2Frame, error) {
	var head [9]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return h2Frame{}, err
	}
	n := int(head[0])<<16 | int(head[1])<<8 | int(head[2])
	raw, err := readFrame(r, head[:], n)
	if err != nil {
		return h2Frame{}, err
	}
	return h2Frame{
		typ: head[3], flags: head[4],
		stream: binary.BigEndian.Uint32(head[5:]) & 0x7fffffff,
		raw:    raw, payload: raw[9:],
	}, nil
}

// headersFragment returns the header block fragment of a HEADERS frame:
// its payload without the pad length and padding (PADDED) and the stream
// dependency and weight (PRIORITY).
func headersFragment(f h2Frame) ([]byte, error) {
	p, pad := f.payload, 0
	if f.flags&h2Padded != 0 {
		if len(p) == 0 {
			return nil, fmt.Errorf("transporttest: grpc: padded HEADERS on stream %d without a pad length", f.stream)
		}
		pad, p = int(p[0]), p[1:]
	}
	if f.flags&h2Priority != 0 {
		if len(p) < 5 {
			return nil, fmt.Errorf("transporttest: grpc: HEADERS on stream %d too short for its priority", f.stream)
		}
		p = p[5:]
	}
	if pad > len(p) {
		return nil, fmt.Errorf("transporttest: grpc: HEADERS on stream %d padded beyond its length", f.stream)
	}
	return p[:len(p)-pad], nil
}

func h2FrameHead(typ, flags byte, stream uint32, n int) []byte {
	return []byte{byte(n >> 16), byte(n >> 8), byte(n), typ, flags, byte(stream>>24) & 0x7f, byte(stream >> 16), byte(stream >> 8), byte(stream)}
}

func h2WindowUpdateFrame(stream uint32, n int) []byte {
	return binary.BigEndian.AppendUint32(h2FrameHead(h2WindowUpdate, 0, stream, 4), uint32(n))
}
