package kafka

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/IBM/sarama"
)

// fakeSASLBroker answers one SaslHandshake and one SaslAuthenticate on
// conn with the given error codes, and records what the client sent.
func fakeSASLBroker(t *testing.T, conn net.Conn, handshakeCode, authCode int16, authMsg string) <-chan string {
	seen := make(chan string, 1)
	go func() {
		defer conn.Close()
		var got []string
		read := func() (key, version int16, corr int32, body []byte) {
			var size [4]byte
			if _, err := io.ReadFull(conn, size[:]); err != nil {
				t.Error(err)
				return
			}
			req := make([]byte, binary.BigEndian.Uint32(size[:]))
			if _, err := io.ReadFull(conn, req); err != nil {
				t.Error(err)
				return
			}
			key, version = int16(binary.BigEndian.Uint16(req)), int16(binary.BigEndian.Uint16(req[2:]))
			corr = int32(binary.BigEndian.Uint32(req[4:]))
			n := binary.BigEndian.Uint16(req[8:])
			got = append(got, fmt.Sprintf("key=%d v=%d client=%s", key, version, req[10:10+n]))
			return key, version, corr, req[10+n:]
		}
		reply := func(corr int32, body []byte) {
			out := binary.BigEndian.AppendUint32(nil, uint32(4+len(body)))
			out = binary.BigEndian.AppendUint32(out, uint32(corr))
			if _, err := conn.Write(append(out, body...)); err != nil {
				t.Error(err)
			}
		}
		_, _, corr, body := read()
		if len(body) < 2 {
			seen <- "short handshake request"
			return
		}
		got = append(got, fmt.Sprintf("mechanism=%q", body[2:]))
		resp := binary.BigEndian.AppendUint16(nil, uint16(handshakeCode))
		resp = binary.BigEndian.AppendUint32(resp, 1)
		resp = appendString(resp, "PLAIN")
		reply(corr, resp)
		if handshakeCode == 0 {
			_, _, corr, body = read()
			if len(body) < 4 {
				seen <- "short authenticate request"
				return
			}
			got = append(got, fmt.Sprintf("auth=%q", body[4:]))
			resp = binary.BigEndian.AppendUint16(nil, uint16(authCode))
			if authMsg == "" {
				resp = binary.BigEndian.AppendUint16(resp, 0xffff) // null
			} else {
				resp = appendString(resp, authMsg)
			}
			resp = appendBytes(resp, nil)
			resp = binary.BigEndian.AppendUint64(resp, 0)
			reply(corr, resp)
		}
		seen <- strings.Join(got, " ")
	}()
	return seen
}

func TestSASLPlainExchange(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name            string
		handshake, auth int16
		msg             string
		want            error
		permanent       bool
		sent            string
	}{
		{name: "accepted",
			sent: `key=17 v=1 client=workwire mechanism="PLAIN" key=36 v=1 client=workwire auth="\x00hub\x00p,w=d"`},
		{name: "bad credentials", auth: 58, msg: "Authentication failed: Invalid username or password",
			want: sarama.ErrSASLAuthenticationFailed, permanent: true},
		{name: "bad credentials, no message", auth: 58, want: sarama.ErrSASLAuthenticationFailed, permanent: true},
		{name: "PLAIN not enabled", handshake: 33, want: sarama.ErrUnsupportedSASLMechanism, permanent: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			client, server := net.Pipe()
			defer client.Close()
			seen := fakeSASLBroker(t, server, tt.handshake, tt.auth, tt.msg)
			err := saslPlain(client, "workwire", "hub", "p,w=d")
			sent := <-seen
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if sent != tt.sent {
					t.Errorf("sent %s\nwant %s", sent, tt.sent)
				}
				return
			}
			if !errors.Is(err, tt.want) || (tt.msg != "" && !strings.Contains(err.Error(), tt.msg)) {
				t.Errorf("err %v, want %v with %q", err, tt.want, tt.msg)
			}
			if permanent(fmt.Errorf("%w: %w", sarama.ErrOutOfBrokers, err)) != tt.permanent {
				t.Errorf("permanent(%v) = %v", err, !tt.permanent)
			}
		})
	}
}
