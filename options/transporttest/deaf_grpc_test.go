package transporttest

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2Client writes what a gRPC client sends, with one HPACK encoder for the
// connection as a client has, so that later header blocks refer to the
// dynamic table earlier ones filled.
type h2Client struct {
	buf bytes.Buffer
	fr  *http2.Framer
	enc *hpack.Encoder
	hb  bytes.Buffer
}

func newH2Client() *h2Client {
	c := &h2Client{}
	c.buf.WriteString(h2Preface)
	c.fr = http2.NewFramer(&c.buf, nil)
	c.enc = hpack.NewEncoder(&c.hb)
	return c
}

func (c *h2Client) block(method string) []byte {
	c.hb.Reset()
	for _, f := range []hpack.HeaderField{
		{Name: ":method", Value: "POST"},
		{Name: ":scheme", Value: "http"},
		{Name: ":path", Value: "/io.cloudevents.v1.CloudEventService/" + method},
		{Name: ":authority", Value: "127.0.0.1:8090"},
		{Name: "content-type", Value: "application/grpc"},
		{Name: "te", Value: "trailers"},
		{Name: "subscription-id", Value: "s-" + strings.Repeat("x", 30)},
	} {
		_ = c.enc.WriteField(f)
	}
	return bytes.Clone(c.hb.Bytes())
}

// call opens stream id on method, in a HEADERS frame padded and with a
// priority, or, with split, in a HEADERS frame and two CONTINUATION frames.
func (c *h2Client) call(t *testing.T, id uint32, method string, split bool) {
	t.Helper()
	b := c.block(method)
	if !split {
		if err := c.fr.WriteHeaders(http2.HeadersFrameParam{
			StreamID: id, BlockFragment: b, EndHeaders: true, PadLength: 7,
			Priority: http2.PriorityParam{StreamDep: 0, Weight: 15},
		}); err != nil {
			t.Fatal(err)
		}
	} else {
		third := len(b) / 3
		if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: b[:third]}); err != nil {
			t.Fatal(err)
		}
		if err := c.fr.WriteContinuation(id, false, b[third:2*third]); err != nil {
			t.Fatal(err)
		}
		if err := c.fr.WriteContinuation(id, true, b[2*third:]); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.fr.WriteData(id, true, []byte("\x00\x00\x00\x00\x02{}")); err != nil {
		t.Fatal(err)
	}
}

// flush runs what c wrote so far through FromClient, which must pass it
// unchanged.
func (c *h2Client) flush(t *testing.T, pc ProtocolConn, r *bufio.Reader) {
	t.Helper()
	want := bytes.Clone(c.buf.Bytes())
	var got []byte
	for c.buf.Len() > 0 || r.Buffered() > 0 {
		b, err := pc.FromClient(r)
		if err != nil {
			t.Fatalf("FromClient: %v", err)
		}
		got = append(got, b...)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("FromClient changed what the client sent")
	}
}

// h2Frames reads b as frames, by their type and stream.
func h2Frames(t *testing.T, b []byte) []string {
	t.Helper()
	fr := http2.NewFramer(nil, bytes.NewReader(b))
	var out []string
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return out
		}
		s := f.Header().Type.String() + " " + strconv.FormatUint(uint64(f.Header().StreamID), 10)
		switch f := f.(type) {
		case *http2.WindowUpdateFrame:
			s += " +" + strconv.FormatUint(uint64(f.Increment), 10)
		case *http2.DataFrame:
			s += " " + string(f.Data())
			if f.StreamEnded() {
				s += " END_STREAM"
			}
		}
		out = append(out, s)
	}
}

// The gRPC framing deafens the Subscribe streams open when it is told to,
// and only their DATA: it gives the server back the flow-control window
// of what it drops, and passes unary calls, streams opened later,
// headers, trailers and the connection's own frames.
func TestGRPCFraming(t *testing.T) {
	pc := GRPC.NewConn()
	client := newH2Client()
	clientIn := bufio.NewReader(&client.buf)
	if err := client.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	client.call(t, 1, "Subscribe", false)
	client.call(t, 3, "Publish", true)
	client.call(t, 5, "Subscribe", true)
	client.flush(t, pc, clientIn)

	var server bytes.Buffer
	sfr := http2.NewFramer(&server, nil)
	serverIn := bufio.NewReader(&server)
	// broker runs what the server wrote through FromBroker and returns the
	// frames that reach the client and those sent back to the server.
	broker := func(deaf bool) (toClient, toBroker []string) {
		t.Helper()
		for server.Len() > 0 || serverIn.Buffered() > 0 {
			c, b, err := pc.FromBroker(serverIn, deaf)
			if err != nil {
				t.Fatalf("FromBroker: %v", err)
			}
			toClient = append(toClient, h2Frames(t, c)...)
			toBroker = append(toBroker, h2Frames(t, b)...)
		}
		return toClient, toBroker
	}
	_ = sfr.WriteSettings(http2.Setting{ID: http2.SettingHeaderTableSize, Val: 8192}, http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1 << 20})
	_ = sfr.WriteData(1, false, []byte("before"))
	if got, back := broker(false); !cmp.Equal(got, []string{"SETTINGS 0", "DATA 1 before"}) || back != nil {
		t.Fatalf("hearing: passed %q, answered %q", got, back)
	}

	pc.(deafener).deafen()
	// Opened after Deafen: it hears. Its header block refers to the
	// dynamic table of the blocks before it, and the client may now use
	// the larger table the server allowed.
	client.enc.SetMaxDynamicTableSizeLimit(8192)
	client.enc.SetMaxDynamicTableSize(8192)
	client.call(t, 7, "Subscribe", false)
	client.flush(t, pc, clientIn)

	_ = sfr.WriteData(1, false, []byte("event"))
	_ = sfr.WriteDataPadded(5, false, []byte("padded"), make([]byte, 9))
	_ = sfr.WriteData(3, false, []byte("publish-response"))
	_ = sfr.WriteData(7, false, []byte("later"))
	_ = sfr.WriteData(1, false, nil)
	_ = sfr.WritePing(false, [8]byte{1})
	_ = sfr.WriteWindowUpdate(0, 100)
	_ = sfr.WriteRSTStream(3, http2.ErrCodeCancel)
	_ = sfr.WriteData(5, true, []byte("last"))
	_ = sfr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0x88}, EndHeaders: true, EndStream: true})
	_ = sfr.WriteData(1, false, []byte("after-trailers"))
	_ = sfr.WriteGoAway(7, http2.ErrCodeNo, nil)
	got, back := broker(true)
	wantClient := []string{
		"DATA 3 publish-response",
		"DATA 7 later",
		"PING 0",
		"WINDOW_UPDATE 0 +100",
		"RST_STREAM 3",
		"DATA 5  END_STREAM", // the stream still ends for the client
		"HEADERS 1",
		"DATA 1 after-trailers", // stream 1 ended: no longer a deaf Subscribe stream
		"GOAWAY 0",
	}
	if diff := cmp.Diff(wantClient, got); diff != "" {
		t.Errorf("deaf, to the client (-want +got):\n%s", diff)
	}
	wantBroker := []string{
		"WINDOW_UPDATE 1 +5", "WINDOW_UPDATE 0 +5",
		"WINDOW_UPDATE 5 +16", "WINDOW_UPDATE 0 +16", // padding and its length count
		// The empty DATA frame takes no window; the last one of stream 5
		// ends it, so only the connection's window is given back.
		"WINDOW_UPDATE 0 +4",
	}
	if diff := cmp.Diff(wantBroker, back); diff != "" {
		t.Errorf("deaf, to the server (-want +got):\n%s", diff)
	}

	// Deafened again, the connection deafens the Subscribe stream opened
	// since: the framing did see it as one.
	pc.(deafener).deafen()
	_ = sfr.WriteData(7, false, []byte("deaf-now"))
	if got, back := broker(true); got != nil || !cmp.Equal(back, []string{"WINDOW_UPDATE 7 +8", "WINDOW_UPDATE 0 +8"}) {
		t.Errorf("deafened again: passed %q, answered %q", got, back)
	}
}

// A ProtocolConn used without a Proxy, told nothing, deafens the streams
// open at its first deaf frame.
func TestGRPCFramingWithoutAProxy(t *testing.T) {
	pc := GRPC.NewConn()
	client := newH2Client()
	client.call(t, 1, "Subscribe", false)
	client.flush(t, pc, bufio.NewReader(&client.buf))
	var server bytes.Buffer
	sfr := http2.NewFramer(&server, nil)
	_ = sfr.WriteData(1, false, []byte("event"))
	c, b, err := pc.FromBroker(bufio.NewReader(&server), true)
	if err != nil || c != nil || len(h2Frames(t, b)) != 2 {
		t.Fatalf("deaf: passed %q, answered %q, %v", h2Frames(t, c), h2Frames(t, b), err)
	}
	if !pc.(dropReporter).droppedLast() {
		t.Error("the drop was not reported")
	}
}
