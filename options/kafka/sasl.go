package kafka

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/IBM/sarama"
)

// readPassword returns the SASL password: Password, or what PasswordFile
// holds now, without a trailing newline.
func (s *SASLConfig) readPassword() (string, error) {
	if s.PasswordFile == "" {
		return s.Password, nil
	}
	b, err := os.ReadFile(s.PasswordFile)
	if err != nil {
		return "", fmt.Errorf("passwordFile: %w", err)
	}
	p := strings.TrimRight(string(b), "\r\n")
	if p == "" {
		return "", fmt.Errorf("passwordFile %s is empty", s.PasswordFile)
	}
	return p, nil
}

// filePasswordPlaceholder stands in sarama's config for a password the
// transport reads from a file: sarama's validation wants one, and neither
// the SCRAM client nor the PLAIN dialer uses it.
const filePasswordPlaceholder = "(read from passwordFile)"

// plainDialer opens the connections of a sarama client whose SASL/PLAIN
// password is in a file. sarama sends a PLAIN password from its config,
// fixed when the client is made; the dialer instead authenticates each new
// connection itself (TLS first when configured, since SASL runs inside it)
// with the file read at that moment, and hands sarama the authenticated
// connection, SASL and TLS off on sarama's side. It speaks SaslHandshake v1
// and SaslAuthenticate v1 (Kafka 1.0 and later). It does not re-authenticate
// a connection (KIP-368): a broker with connections.max.reauth.ms set closes
// it when the session expires, and sarama opens a new one.
type plainDialer struct {
	user     string
	password func() (string, error)
	tls      *tls.Config    // nil: plain TCP
	sarama   *sarama.Config // read at each dial: its client ID and Net's dial settings, as tuned
}

// Dial implements sarama's proxy dialer (golang.org/x/net/proxy.Dialer):
// it connects to addr within the config's DialTimeout for the connect, the
// TLS handshake and the authentication together.
func (d *plainDialer) Dial(network, addr string) (net.Conn, error) {
	password, err := d.password()
	if err != nil {
		return nil, fmt.Errorf("sasl: %w", err)
	}
	n := d.sarama.Net
	dialer := net.Dialer{KeepAlive: n.KeepAlive, LocalAddr: n.LocalAddr}
	var deadline time.Time
	if n.DialTimeout > 0 {
		deadline = time.Now().Add(n.DialTimeout)
		dialer.Deadline = deadline
	}
	conn, err := dialer.Dial(network, addr)
	if err != nil {
		return nil, err
	}
	_ = conn.SetDeadline(deadline)
	if conn, err = d.handshake(conn, addr, password); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("connect to %s: %w", addr, err)
	}
	_ = conn.SetDeadline(time.Time{})
	return conn, nil
}

func (d *plainDialer) handshake(conn net.Conn, addr, password string) (net.Conn, error) {
	if d.tls != nil {
		cfg := d.tls.Clone()
		if cfg.ServerName == "" {
			// What sarama does: verify the broker against its own host.
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc := tls.Client(conn, cfg)
		if err := tc.Handshake(); err != nil {
			return conn, err
		}
		conn = tc
	}
	return conn, saslPlain(conn, d.sarama.ClientID, d.user, password)
}

// Kafka API keys and the versions saslPlain speaks.
const (
	apiSaslHandshake    = 17
	apiSaslAuthenticate = 36
	saslAPIVersion      = 1
	// maxSASLResponse bounds what a broker may answer during the exchange.
	maxSASLResponse = 1 << 20
)

// saslPlain authenticates conn with SASL/PLAIN (RFC 4616) the Kafka way:
// SaslHandshake naming the mechanism, then SaslAuthenticate carrying
// "\x00user\x00password". A refusal wraps the broker's error code as a
// sarama.KError (sarama.ErrSASLAuthenticationFailed for bad credentials).
func saslPlain(conn net.Conn, clientID, user, password string) error {
	rw := bufio.NewReadWriter(bufio.NewReader(conn), bufio.NewWriter(conn))
	var body []byte
	body = appendString(body, string(sarama.SASLTypePlaintext))
	resp, err := roundTrip(rw, apiSaslHandshake, 0, clientID, body)
	if err != nil {
		return fmt.Errorf("sasl handshake: %w", err)
	}
	if code, ok := readInt16(&resp); !ok {
		return errors.New("sasl handshake: short response")
	} else if code != 0 {
		return fmt.Errorf("sasl handshake: %w", sarama.KError(code))
	}

	body = appendBytes(nil, []byte("\x00"+user+"\x00"+password))
	resp, err = roundTrip(rw, apiSaslAuthenticate, 1, clientID, body)
	if err != nil {
		return fmt.Errorf("sasl authenticate: %w", err)
	}
	code, ok := readInt16(&resp)
	if !ok {
		return errors.New("sasl authenticate: short response")
	}
	if code != 0 {
		if msg, ok := readNullableString(&resp); ok && msg != "" {
			return fmt.Errorf("sasl authenticate: %w: %s", sarama.KError(code), msg)
		}
		return fmt.Errorf("sasl authenticate: %w", sarama.KError(code))
	}
	return nil
}

// roundTrip sends one request (header v1, as both APIs use at version 1)
// and returns the body of its response.
func roundTrip(rw *bufio.ReadWriter, apiKey int16, correlationID int32, clientID string, body []byte) ([]byte, error) {
	req := binary.BigEndian.AppendUint32(nil, 0) // size, set below
	req = binary.BigEndian.AppendUint16(req, uint16(apiKey))
	req = binary.BigEndian.AppendUint16(req, saslAPIVersion)
	req = binary.BigEndian.AppendUint32(req, uint32(correlationID))
	req = appendString(req, clientID)
	req = append(req, body...)
	binary.BigEndian.PutUint32(req, uint32(len(req)-4))
	if _, err := rw.Write(req); err != nil {
		return nil, err
	}
	if err := rw.Flush(); err != nil {
		return nil, err
	}
	var hdr [8]byte
	if _, err := io.ReadFull(rw, hdr[:]); err != nil {
		return nil, err
	}
	size := int32(binary.BigEndian.Uint32(hdr[:4]))
	if size < 4 || size > maxSASLResponse {
		return nil, fmt.Errorf("response of %d bytes", size)
	}
	if got := int32(binary.BigEndian.Uint32(hdr[4:])); got != correlationID {
		return nil, fmt.Errorf("response to request %d, want %d", got, correlationID)
	}
	resp := make([]byte, size-4)
	if _, err := io.ReadFull(rw, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func appendBytes(b, v []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
	return append(b, v...)
}

func readInt16(b *[]byte) (int16, bool) {
	if len(*b) < 2 {
		return 0, false
	}
	v := int16(binary.BigEndian.Uint16(*b))
	*b = (*b)[2:]
	return v, true
}

func readNullableString(b *[]byte) (string, bool) {
	n, ok := readInt16(b)
	if !ok || n < 0 || len(*b) < int(n) {
		return "", ok && n < 0
	}
	s := string((*b)[:n])
	*b = (*b)[n:]
	return s, true
}
