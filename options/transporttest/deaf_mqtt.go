package transporttest

import (
	"bufio"
	"errors"
	"io"
)

// mqttPublish is the packet type of PUBLISH, in the high nibble of an MQTT
// packet's first byte.
const mqttPublish = 3

// MQTT 3.1.1 and 5 share the fixed header this frames by: a byte of packet
// type and flags, then the remaining length.
type mqttProtocol struct{}

func (mqttProtocol) NewConn() ProtocolConn { return mqttConn{} }

type mqttConn struct{}

// FromClient passes what the client sends as it comes: only what the
// broker delivers is ever dropped.
func (mqttConn) FromClient(r *bufio.Reader) ([]byte, error) { return chunk(r) }

func (mqttConn) FromBroker(r *bufio.Reader, deaf bool) (toClient, toBroker []byte, err error) {
	head, n, err := readMQTTFixedHeader(r)
	if err != nil {
		return nil, nil, err
	}
	packet, err := readFrame(r, head, n)
	if err != nil {
		return nil, nil, err
	}
	// The client never acknowledges a QoS 1 or 2 PUBLISH it did not see,
	// as it would not for a subscription the broker lost.
	if deaf && packet[0]>>4 == mqttPublish {
		return nil, nil, nil
	}
	return packet, nil, nil
}

// readMQTTFixedHeader reads an MQTT fixed header from r and returns its
// bytes and the remaining length it gives: a variable byte integer of one
// to four bytes, seven bits each, least significant first, the high bit
// saying that another byte follows. An encoding longer than it needs is
// malformed (MQTT-1.5.5-1), as is packet type 0, which is reserved. io.EOF
// before the first byte is a clean end of the connection.
func readMQTTFixedHeader(r io.ByteReader) ([]byte, int, error) {
	first, err := r.ReadByte()
	if err != nil {
		return nil, 0, err
	}
	if first>>4 == 0 {
		return nil, 0, errors.New("transporttest: mqtt: packet type 0 is reserved")
	}
	head := []byte{first}
	n, shift := 0, 0
	for i := range 4 {
		b, err := r.ReadByte()
		if err != nil {
			return nil, 0, midFrame(err)
		}
		head = append(head, b)
		n |= int(b&0x7f) << shift
		shift += 7
		if b&0x80 != 0 {
			continue
		}
		if b == 0 && i > 0 {
			return nil, 0, errors.New("transporttest: mqtt: remaining length not in its shortest encoding")
		}
		return head, n, nil
	}
	return nil, 0, errors.New("transporttest: mqtt: remaining length longer than 4 bytes")
}
