package transporttest

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// lines is a Protocol for tests: the broker's side is framed by line, and
// a deaf connection drops the lines that start with "deliver" and answers
// the broker "ack" for each.
type lines struct{}

func (lines) NewConn() ProtocolConn { return linesConn{} }

type linesConn struct{}

func (linesConn) FromClient(r *bufio.Reader) ([]byte, error) { return chunk(r) }

func (linesConn) FromBroker(r *bufio.Reader, deaf bool) ([]byte, []byte, error) {
	line, err := r.ReadBytes('\n')
	if err != nil {
		return nil, nil, err
	}
	if deaf && bytes.HasPrefix(line, []byte("deliver")) {
		return nil, []byte("ack" + strings.TrimPrefix(string(line), "deliver")), nil
	}
	return line, nil, nil
}

// lineClient is a connection through a proxy to an echo server.
type lineClient struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dialLines(t *testing.T, p *Proxy) *lineClient {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &lineClient{t: t, c: c, r: bufio.NewReader(c)}
}

func (l *lineClient) send(line string) {
	l.t.Helper()
	if _, err := l.c.Write([]byte(line + "\n")); err != nil {
		l.t.Fatal(err)
	}
}

// read returns the next line, or an error if none comes within d.
func (l *lineClient) read(d time.Duration) (string, error) {
	_ = l.c.SetReadDeadline(time.Now().Add(d))
	return l.r.ReadString('\n')
}

func (l *lineClient) expect(want string) {
	l.t.Helper()
	got, err := l.read(10 * time.Second)
	if err != nil || got != want+"\n" {
		l.t.Fatalf("read %q, %v; want %q", got, err, want)
	}
}

// A protocol proxy deafens the connections open when Deafen is called, and
// only those; what it drops it counts, and its answers to the broker reach
// the broker. Stall, Resume and Cut work on framed connections as on raw
// ones.
func TestProtocolProxyDeafens(t *testing.T) {
	p, err := NewProtocolProxy(lines{}, echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	old := dialLines(t, p)
	old.send("deliver 1")
	old.expect("deliver 1")

	p.Deafen()
	// The echo server sends the line back; the deaf proxy drops it and
	// answers "ack 2", which the echo server sends back in turn.
	old.send("deliver 2")
	old.expect("ack 2")
	old.send("ping")
	old.expect("ping")
	if got := p.Deafened(); got != 1 {
		t.Errorf("Deafened = %d, want 1", got)
	}

	later := dialLines(t, p)
	later.send("deliver 3")
	later.expect("deliver 3")

	p.Stall()
	later.send("stalled")
	if got, err := later.read(300 * time.Millisecond); err == nil {
		t.Fatalf("a stalled protocol proxy forwarded %q", got)
	}
	p.Resume()
	later.expect("stalled")

	p.Cut()
	for _, c := range []*lineClient{old, later} {
		if _, err := c.read(10 * time.Second); err == nil {
			t.Fatal("a cut framed connection still reads")
		}
	}
	again := dialLines(t, p)
	again.send("deliver 4")
	again.expect("deliver 4") // a connection made after Deafen hears
	if got := p.Deafened(); got != 1 {
		t.Errorf("Deafened = %d after hearing connections, want 1", got)
	}
}

func TestDeafenPanicsOnARawProxy(t *testing.T) {
	p, err := NewProxy(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	defer func() {
		if recover() == nil {
			t.Error("Deafen on a proxy made by NewProxy did not panic")
		}
	}()
	p.Deafen()
}

func TestNewProtocolProxyWithoutAProtocol(t *testing.T) {
	if p, err := NewProtocolProxy(nil, echo(t)); err == nil {
		p.Close()
		t.Fatal("NewProtocolProxy(nil) succeeded")
	}
}

func TestMQTTRemainingLength(t *testing.T) {
	for _, tt := range []struct {
		name    string
		in      []byte // after the packet's first byte
		want    int
		bad     bool
		wantErr error // with bad: the error, or nil for any
	}{
		{name: "zero", in: []byte{0x00}, want: 0},
		{name: "one byte max", in: []byte{0x7f}, want: 127},
		{name: "two bytes min", in: []byte{0x80, 0x01}, want: 128},
		{name: "two bytes max", in: []byte{0xff, 0x7f}, want: 16_383},
		{name: "three bytes min", in: []byte{0x80, 0x80, 0x01}, want: 16_384},
		{name: "three bytes max", in: []byte{0xff, 0xff, 0x7f}, want: 2_097_151},
		{name: "four bytes min", in: []byte{0x80, 0x80, 0x80, 0x01}, want: 2_097_152},
		{name: "four bytes max", in: []byte{0xff, 0xff, 0xff, 0x7f}, want: 268_435_455},
		{name: "321", in: []byte{0xc1, 0x02}, want: 321},
		{name: "five bytes", in: []byte{0xff, 0xff, 0xff, 0xff, 0x01}, bad: true},
		{name: "continues past four", in: []byte{0x80, 0x80, 0x80, 0x80}, bad: true},
		{name: "not shortest", in: []byte{0x80, 0x00}, bad: true},
		{name: "not shortest in four", in: []byte{0xff, 0x80, 0x80, 0x00}, bad: true},
		{name: "missing", in: nil, bad: true, wantErr: io.ErrUnexpectedEOF},
		{name: "truncated", in: []byte{0x80, 0x80}, bad: true, wantErr: io.ErrUnexpectedEOF},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]byte{0x30}, tt.in...)
			head, n, err := readMQTTFixedHeader(bytes.NewReader(in))
			if tt.bad {
				if err == nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
					t.Fatalf("err %v, want an error (%v)", err, tt.wantErr)
				}
				return
			}
			if err != nil || n != tt.want || !bytes.Equal(head, in) {
				t.Fatalf("got %d, header % x, %v; want %d, % x", n, head, err, tt.want, in)
			}
		})
	}
	if _, _, err := readMQTTFixedHeader(bytes.NewReader(nil)); err != io.EOF {
		t.Errorf("at the end of the connection: %v, want io.EOF", err)
	}
	if _, _, err := readMQTTFixedHeader(bytes.NewReader([]byte{0x00, 0x00})); err == nil {
		t.Error("packet type 0 accepted")
	}
}

// mqttPacket returns the packet whose first byte (type and flags) is first,
// with body after its remaining length.
func mqttPacket(first byte, body string) string {
	var rl []byte
	n := len(body)
	for {
		b := byte(n & 0x7f)
		n >>= 7
		if n > 0 {
			rl = append(rl, b|0x80)
			continue
		}
		rl = append(rl, b)
		break
	}
	return string(append([]byte{first}, rl...)) + body
}

// drain runs every frame of in through FromBroker and returns what reaches
// the client and the broker, in a reader of bufio's smallest buffer fed a
// byte at a time, so that frames arrive split and lines overflow the
// buffer.
func drain(t *testing.T, c ProtocolConn, in string, deaf bool) (toClient, toBroker string) {
	t.Helper()
	r := bufio.NewReaderSize(iotest.OneByteReader(strings.NewReader(in)), 16)
	var client, broker strings.Builder
	for {
		c2, b2, err := c.FromBroker(r, deaf)
		if err == io.EOF {
			return client.String(), broker.String()
		}
		if err != nil {
			t.Fatalf("FromBroker: %v", err)
		}
		client.Write(c2)
		broker.Write(b2)
	}
}

func TestMQTTFraming(t *testing.T) {
	big := strings.Repeat("p", 200_000) // a remaining length of three bytes, read past eagerRead
	connack := mqttPacket(0x20, "\x00\x00\x00")
	publish := mqttPacket(0x32, "\x00\x03a/b\x00\x01\x00payload")
	bigPublish := mqttPacket(0x30, "\x00\x03a/b\x00"+big)
	suback := mqttPacket(0x90, "\x00\x01\x00\x01")
	puback := mqttPacket(0x40, "\x00\x02\x00")
	pingresp := mqttPacket(0xd0, "")
	disconnect := mqttPacket(0xe0, "\x00\x00")
	in := connack + publish + suback + bigPublish + puback + pingresp + publish + disconnect

	if got, _ := drain(t, MQTT.NewConn(), in, false); got != in {
		t.Errorf("hearing: %d bytes passed of %d", len(got), len(in))
	}
	want := connack + suback + puback + pingresp + disconnect
	if got, toBroker := drain(t, MQTT.NewConn(), in, true); got != want || toBroker != "" {
		t.Errorf("deaf: passed %q and answered %q, want %q and nothing", got, toBroker, want)
	}
	client := "\x10\x0a\x00\x04MQTT\x05\x02\x00\x3c" + mqttPacket(0xc0, "")
	if got := fromClientAll(t, MQTT.NewConn(), client); got != client {
		t.Errorf("from the client: %q, want %q", got, client)
	}
}

// fromClientAll runs in through FromClient, read a byte at a time.
func fromClientAll(t *testing.T, c ProtocolConn, in string) string {
	t.Helper()
	r := bufio.NewReaderSize(iotest.OneByteReader(strings.NewReader(in)), 16)
	var out strings.Builder
	for {
		b, err := c.FromClient(r)
		if err == io.EOF {
			return out.String()
		}
		if err != nil {
			t.Fatalf("FromClient: %v", err)
		}
		out.Write(b)
	}
}

func natsHMSG(subject, sid, reply, headers, payload string) string {
	fields := []string{"HMSG", subject, sid}
	if reply != "" {
		fields = append(fields, reply)
	}
	fields = append(fields, strconv.Itoa(len(headers)), strconv.Itoa(len(headers)+len(payload)))
	return strings.Join(fields, " ") + "\r\n" + headers + payload + "\r\n"
}

func natsMSG(op, subject, sid, reply, payload string) string {
	fields := []string{op, subject, sid}
	if reply != "" {
		fields = append(fields, reply)
	}
	fields = append(fields, strconv.Itoa(len(payload)))
	return strings.Join(fields, " ") + "\r\n" + payload + "\r\n"
}

// The NATS framing passes a server's protocol lines and the answers to the
// client's requests, deaf or not, and drops what a subscription delivers
// when deaf: JetStream deliveries, idle heartbeats, plain messages.
func TestNATSFraming(t *testing.T) {
	info := `INFO {"server_id":"NDX5Y4HAGOWQ","server_name":"n1","version":"2.10.22","proto":1,"headers":true,"max_payload":1048576,"jetstream":true,"client_id":7}` + "\r\n"
	jsDelivery := natsMSG("MSG", "_INBOX.pull.1", "1", "$JS.ACK.orders.worker.1.12.12.1700000000000000000.0", `{"id":1}`)
	pubAck := natsMSG("MSG", "_INBOX.x", "2", "", `{"stream":"orders","seq":12}`)
	heartbeat := natsHMSG("_INBOX.pull.1", "1", "", "NATS/1.0 100 Idle Heartbeat\r\n\r\n", "")
	flowControl := natsHMSG("_INBOX.push.2", "5", "$JS.FC.orders.x.1", "NATS/1.0 100 FlowControl Request\r\n\r\n", "")
	noMessages := natsHMSG("_INBOX.pull.1", "1", "", "NATS/1.0 404 No Messages\r\n\r\n", "")
	hmsgReply := natsHMSG("_INBOX.y", "3", "", "NATS/1.0\r\nNats-Msg-Id: 7\r\n\r\n", `{"type":"io.nats.jetstream.api.v1.stream_info_response"}`)
	plain := natsMSG("MSG", "orders.created", "4", "", "hello")
	plainWithReply := natsMSG("msg", "orders.created", "4", "reply.to", "hi") // operations are case-insensitive
	inboxWithReply := natsMSG("MSG", "_INBOX.z", "6", "_INBOX.other", "request")
	plainHMSG := natsHMSG("orders.updated", "4", "", "NATS/1.0\r\nCe-Id: 1\r\n\r\n", "body")
	empty := natsMSG("MSG", "orders.created", "4", "", "")
	tabs := "MSG\t_INBOX.t\t9\t2\r\nok\r\n"

	type frame struct {
		bytes string
		deaf  bool // passed when deaf
	}
	stream := []frame{
		{info, true},
		{"PING\r\n", true},
		{"+OK\r\n", true},
		{jsDelivery, false},
		{pubAck, true},
		{heartbeat, false},
		{flowControl, false},
		{noMessages, true},
		{hmsgReply, true},
		{plain, false},
		{plainWithReply, false},
		{inboxWithReply, false},
		{plainHMSG, false},
		{empty, false},
		{tabs, true},
		{"PONG\r\n", true},
		{"-ERR 'Unknown Protocol Operation'\r\n", true},
	}
	var in, wantDeaf strings.Builder
	for _, f := range stream {
		in.WriteString(f.bytes)
		if f.deaf {
			wantDeaf.WriteString(f.bytes)
		}
	}
	if got, _ := drain(t, NATS.NewConn(), in.String(), false); got != in.String() {
		t.Errorf("hearing passed\n%q\nwant\n%q", got, in.String())
	}
	if got, toBroker := drain(t, NATS.NewConn(), in.String(), true); got != wantDeaf.String() || toBroker != "" {
		t.Errorf("deaf passed\n%q\nand answered %q; want\n%q\nand nothing", got, toBroker, wantDeaf.String())
	}
	// Each frame alone: what was dropped counts as dropped.
	for _, f := range stream {
		got, _ := drain(t, NATS.NewConn(), f.bytes, true)
		if (got != "") != f.deaf {
			t.Errorf("deaf, %q passed %q", f.bytes, got)
		}
	}
	client := "CONNECT {\"verbose\":false}\r\nSUB orders.> 1\r\nPUB orders.created _INBOX.x 5\r\nhello\r\nPING\r\n"
	if got := fromClientAll(t, NATS.NewConn(), client); got != client {
		t.Errorf("from the client: %q, want %q", got, client)
	}
}

// What a side sends that does not parse ends its connection with an error:
// no panic, no waiting for bytes that the framing should have refused.
func TestMalformedFrames(t *testing.T) {
	for _, tt := range []struct {
		name       string
		p          Protocol
		fromClient string
		fromBroker string
	}{
		{name: "mqtt type 0", p: MQTT, fromBroker: "\x00\x00"},
		{name: "mqtt length over 4 bytes", p: MQTT, fromBroker: "\x30\xff\xff\xff\xff\x7f"},
		{name: "mqtt truncated packet", p: MQTT, fromBroker: "\x30\x05ab"},
		{name: "mqtt truncated length", p: MQTT, fromBroker: "\x30\x80"},
		{name: "nats size not a number", p: NATS, fromBroker: "MSG a 1 x\r\n"},
		{name: "nats negative size", p: NATS, fromBroker: "MSG a 1 -1\r\n"},
		{name: "nats size too large", p: NATS, fromBroker: "MSG a 1 999999999999\r\n"},
		{name: "nats too few fields", p: NATS, fromBroker: "MSG a 5\r\n"},
		{name: "nats too many fields", p: NATS, fromBroker: "HMSG a 1 r x 2 3 4\r\n"},
		{name: "nats headers beyond total", p: NATS, fromBroker: "HMSG a 1 10 5\r\n"},
		{name: "nats payload without crlf", p: NATS, fromBroker: "MSG a 1 2\r\nhiXX"},
		{name: "nats truncated payload", p: NATS, fromBroker: "MSG a 1 5\r\nhi"},
		{name: "nats line without cr", p: NATS, fromBroker: "PING\n"},
		{name: "nats truncated line", p: NATS, fromBroker: "PIN"},
		{name: "nats endless line", p: NATS, fromBroker: strings.Repeat("x", natsMaxLine+10)},
		{name: "grpc bad preface", p: GRPC, fromClient: "GET / HTTP/1.1\r\nHost: x\r\n\r\n"},
		{name: "grpc truncated preface", p: GRPC, fromClient: h2Preface[:10]},
		{name: "grpc truncated frame", p: GRPC, fromBroker: "\x00\x00\x05\x00\x00\x00\x00\x00\x01ab"},
		{name: "grpc truncated frame header", p: GRPC, fromBroker: "\x00\x00\x05\x00"},
		{name: "grpc data on stream 0", p: GRPC, fromBroker: "\x00\x00\x01\x00\x00\x00\x00\x00\x00a"},
		{name: "grpc data padded beyond", p: GRPC, fromBroker: "\x00\x00\x02\x00\x08\x00\x00\x00\x01\x05a"},
		{name: "grpc data padded empty", p: GRPC, fromBroker: "\x00\x00\x00\x00\x08\x00\x00\x00\x01"},
		{name: "grpc settings length", p: GRPC, fromBroker: "\x00\x00\x05\x04\x00\x00\x00\x00\x00abcde"},
		{name: "grpc headers on stream 0", p: GRPC, fromClient: h2Preface + "\x00\x00\x01\x01\x04\x00\x00\x00\x00\x82"},
		{name: "grpc headers padded beyond", p: GRPC, fromClient: h2Preface + "\x00\x00\x02\x01\x0c\x00\x00\x00\x01\x05\x82"},
		{name: "grpc headers padded empty", p: GRPC, fromClient: h2Preface + "\x00\x00\x00\x01\x0c\x00\x00\x00\x01"},
		{name: "grpc headers priority short", p: GRPC, fromClient: h2Preface + "\x00\x00\x03\x01\x24\x00\x00\x00\x01abc"},
		{name: "grpc bad hpack index", p: GRPC, fromClient: h2Preface + "\x00\x00\x01\x01\x04\x00\x00\x00\x01\xbf"},
		{name: "grpc truncated header block", p: GRPC, fromClient: h2Preface + "\x00\x00\x01\x01\x04\x00\x00\x00\x01\x44"},
		{name: "grpc continuation outside a block", p: GRPC, fromClient: h2Preface + "\x00\x00\x01\x09\x04\x00\x00\x00\x01\x82"},
		{name: "grpc frame inside a header block", p: GRPC, fromClient: h2Preface + "\x00\x00\x01\x01\x00\x00\x00\x00\x01\x82" + "\x00\x00\x00\x04\x00\x00\x00\x00\x00"},
		{name: "grpc push promise from a client", p: GRPC, fromClient: h2Preface + "\x00\x00\x04\x05\x04\x00\x00\x00\x01\x00\x00\x00\x02"},
		{name: "kafka negative size", p: Kafka, fromBroker: "\xff\xff\xff\xff"},
		{name: "kafka truncated size", p: Kafka, fromBroker: "\x00\x00"},
		{name: "kafka truncated frame", p: Kafka, fromBroker: "\x00\x00\x00\x08\x00\x00"},
		{name: "kafka response without correlation", p: Kafka, fromBroker: "\x00\x00\x00\x02\x00\x00"},
		{name: "kafka request too short", p: Kafka, fromClient: "\x00\x00\x00\x04\x00\x01\x00\x0c"},
		{name: "kafka request without client id", p: Kafka, fromClient: "\x00\x00\x00\x08\x00\x01\x00\x0c\x00\x00\x00\x01"},
		{name: "kafka client id beyond", p: Kafka, fromClient: "\x00\x00\x00\x0a\x00\x01\x00\x0c\x00\x00\x00\x01\x00\x09"},
		{name: "kafka client id length", p: Kafka, fromClient: "\x00\x00\x00\x0a\x00\x01\x00\x0c\x00\x00\x00\x01\xff\xf0"},
		{name: "kafka fetch v12 without tags", p: Kafka, fromClient: "\x00\x00\x00\x0a\x00\x01\x00\x0c\x00\x00\x00\x01\xff\xff"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.p.NewConn()
			if tt.fromClient != "" {
				err := runClient(c, tt.fromClient)
				if err == nil || err == io.EOF {
					t.Errorf("from the client: %v, want an error", err)
				}
				t.Log(err)
			}
			if tt.fromBroker != "" {
				err := runBroker(c, tt.fromBroker, true)
				if err == nil || err == io.EOF {
					t.Errorf("from the broker: %v, want an error", err)
				}
				t.Log(err)
			}
		})
	}
}

// runClient and runBroker run in through a side until it fails, and return
// its error: io.EOF if all of in was well formed.
func runClient(c ProtocolConn, in string) error {
	r := bufio.NewReader(strings.NewReader(in))
	for {
		if _, err := c.FromClient(r); err != nil {
			return err
		}
	}
}

func runBroker(c ProtocolConn, in string, deaf bool) error {
	r := bufio.NewReader(strings.NewReader(in))
	for {
		if _, _, err := c.FromBroker(r, deaf); err != nil {
			return err
		}
	}
}

// Whatever bytes a side sends, the framing returns an error or frames, and
// never panics: seeds of every protocol, and what the fuzzer makes of them.
func FuzzProtocols(f *testing.F) {
	f.Add(byte(0), []byte(mqttPacket(0x32, "\x00\x03a/b\x00\x01x")+mqttPacket(0xd0, "")), true)
	f.Add(byte(1), []byte("INFO {}\r\n"+natsHMSG("_INBOX.a", "1", "", "NATS/1.0 100 Idle\r\n\r\n", "")+natsMSG("MSG", "a", "1", "", "x")), true)
	f.Add(byte(2), []byte(h2Preface+"\x00\x00\x01\x01\x05\x00\x00\x00\x01\x82"+"\x00\x00\x01\x00\x01\x00\x00\x00\x01x"), true)
	f.Add(byte(3), []byte("\x00\x00\x00\x0e\x00\x01\x00\x04\x00\x00\x00\x01\x00\x01x\x00\x00\x00"), false)
	protocols := []Protocol{MQTT, NATS, GRPC, Kafka}
	f.Fuzz(func(t *testing.T, which byte, in []byte, deaf bool) {
		p := protocols[int(which)%len(protocols)]
		_ = runClient(p.NewConn(), string(in))
		c := p.NewConn()
		if d, ok := c.(deafener); ok && deaf {
			d.deafen()
		}
		_ = runClient(c, string(in))
		_ = runBroker(c, string(in), deaf)
	})
}

// Kill and Close end framed connections as they end raw ones.
func TestProtocolProxyKillsAndCloses(t *testing.T) {
	a, b := named(t, "a"), named(t, "b")
	p, err := NewProtocolProxy(lines{}, a, b)
	if err != nil {
		t.Fatal(err)
	}
	onA, onB := dialLines(t, p), dialLines(t, p)
	onA.send("x")
	onA.expect("a:x")
	onB.send("x")
	onB.expect("b:x")
	p.Kill(a)
	if _, err := onA.read(10 * time.Second); err == nil {
		t.Error("a framed connection to a killed replica still reads")
	}
	onB.send("y")
	onB.expect("b:y")
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := onB.read(10 * time.Second); err == nil {
		t.Error("a framed connection still reads after Close")
	}
}
