package transporttest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// NATS frames the server's side of the text protocol by line: MSG and HMSG
// lines announce a payload, every other line (INFO, PING, PONG, +OK, -ERR)
// is whole.
type natsProtocol struct{}

func (natsProtocol) NewConn() ProtocolConn { return natsConn{} }

type natsConn struct{}

// Bounds on what a server sends, beyond which a frame is taken as
// malformed: an INFO line with its cluster's URLs stays far below
// natsMaxLine, and natsMaxPayload is the highest max_payload a NATS server
// accepts.
const (
	natsMaxLine    = 1 << 20
	natsMaxPayload = 64 << 20
)

// FromClient passes what the client sends as it comes: only what the
// server delivers is ever dropped.
func (natsConn) FromClient(r *bufio.Reader) ([]byte, error) { return chunk(r) }

func (natsConn) FromBroker(r *bufio.Reader, deaf bool) (toClient, toBroker []byte, err error) {
	line, err := readNATSLine(r)
	if err != nil {
		return nil, nil, err
	}
	m, ok, err := parseNATSMsg(line)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		return line, nil, nil
	}
	frame, err := readFrame(r, line, m.total+2)
	if err != nil {
		return nil, nil, err
	}
	if !bytes.HasSuffix(frame, []byte("\r\n")) {
		return nil, nil, fmt.Errorf("transporttest: nats: the payload of a message on %s does not end in CRLF", m.subject)
	}
	payload := frame[len(line) : len(frame)-2]
	if deaf && !natsReply(m, payload[:m.headers]) {
		return nil, nil, nil
	}
	return frame, nil, nil
}

// readNATSLine reads a line, CRLF included.
func readNATSLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		part, err := r.ReadSlice('\n')
		if len(line)+len(part) > natsMaxLine {
			return nil, fmt.Errorf("transporttest: nats: a line longer than %d bytes", natsMaxLine)
		}
		line = append(line, part...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			if len(line) == 0 {
				return nil, err
			}
			return nil, midFrame(err)
		}
		if !bytes.HasSuffix(line, []byte("\r\n")) {
			return nil, fmt.Errorf("transporttest: nats: line %.40q does not end in CRLF", line)
		}
		return line, nil
	}
}

// natsMsg is what a MSG or HMSG line says of the message that follows it.
type natsMsg struct {
	subject, reply string
	headers, total int // HMSG's header bytes (0 for MSG) and all its bytes
}

// parseNATSMsg parses line if it is a MSG or HMSG line (ok); other lines
// are not its business. The protocol's operation names are
// case-insensitive and its fields are separated by spaces or tabs:
//
//	MSG <subject> <sid> [reply-to] <#bytes>
//	HMSG <subject> <sid> [reply-to] <#header bytes> <#total bytes>
func parseNATSMsg(line []byte) (m natsMsg, ok bool, err error) {
	fields := strings.FieldsFunc(string(line[:len(line)-2]), func(r rune) bool { return r == ' ' || r == '\t' })
	if len(fields) == 0 {
		return m, false, nil
	}
	var numbers []string
	switch op := strings.ToUpper(fields[0]); {
	case op == "MSG" && (len(fields) == 4 || len(fields) == 5):
		numbers = fields[len(fields)-1:]
		fields = fields[:len(fields)-1]
	case op == "HMSG" && (len(fields) == 5 || len(fields) == 6):
		numbers = fields[len(fields)-2:]
		fields = fields[:len(fields)-2]
	case op == "MSG" || op == "HMSG":
		return m, false, fmt.Errorf("transporttest: nats: %s line with %d fields: %.80q", op, len(fields), line)
	default:
		return m, false, nil
	}
	m.subject = fields[1]
	if len(fields) == 4 {
		m.reply = fields[3]
	}
	sizes := make([]int, len(numbers))
	for i, s := range numbers {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > natsMaxPayload {
			return m, false, fmt.Errorf("transporttest: nats: size %q in %.80q: want 0 to %d", s, line, natsMaxPayload)
		}
		sizes[i] = n
	}
	m.total = sizes[len(sizes)-1]
	if len(sizes) == 2 {
		m.headers = sizes[0]
	}
	if m.headers > m.total {
		return m, false, fmt.Errorf("transporttest: nats: %d header bytes of %d in all in %.80q", m.headers, m.total, line)
	}
	return m, true, nil
}

// natsReply reports whether a message answers one of the client's own
// requests — a JetStream API call, a publish acknowledgement — which a
// deaf connection still passes, as a middlebox that passes requests and
// their answers would: it comes to an inbox, asks for no reply itself, and
// is not a pull consumer's idle heartbeat (status 100). JetStream's
// deliveries to a pull consumer's inbox ask for an acknowledgement
// ($JS.ACK...), so they are not replies.
func natsReply(m natsMsg, headers []byte) bool {
	return strings.HasPrefix(m.subject, "_INBOX.") && m.reply == "" && !natsStatus(headers, "100")
}

// natsStatus reports whether headers begin with the status line of code.
func natsStatus(headers []byte, code string) bool {
	rest, ok := bytes.CutPrefix(headers, []byte("NATS/1.0 "+code))
	return ok && (len(rest) == 0 || rest[0] == ' ' || rest[0] == '\t' || rest[0] == '\r')
}
