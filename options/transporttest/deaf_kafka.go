package transporttest

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Kafka frames requests and responses by their size prefix. A deaf
// connection still answers every Fetch, as a broker must, but with no
// records: the consumer learns how far the partition goes (the high
// watermark) and never gets there.
//
// Every frame from the client must be a request: the authentication bytes
// that follow a SaslHandshake v0, which carry no request header, end the
// connection (clients since Kafka 1.0 send them in SaslAuthenticate
// requests).
type kafkaProtocol struct{}

func (kafkaProtocol) NewConn() ProtocolConn { return &kafkaConn{fetches: make(map[int32]int16)} }

const (
	kafkaFetch              = 1
	kafkaControlledShutdown = 7

	kafkaFetchFlexible = 12 // the first Fetch version with tagged fields and compact lengths
	kafkaFetchTopicIDs = 13 // the first that names topics by ID
	kafkaFetchNewest   = 18 // the newest Fetch version the proxy knows
)

// kafkaMaxFrame bounds a request or response, beyond which its size is
// taken as malformed.
const kafkaMaxFrame = 1 << 30

type kafkaConn struct {
	mu      sync.Mutex
	fetches map[int32]int16 // correlation ID of each Fetch request in flight to its version

	emptied bool // the broker's goroutine alone: whether its last response was emptied
}

func (c *kafkaConn) droppedLast() bool { return c.emptied }

// FromClient passes each request on, noting the version of each Fetch: a
// response does not say its own.
func (c *kafkaConn) FromClient(r *bufio.Reader) ([]byte, error) {
	frame, err := readKafkaFrame(r)
	if err != nil {
		return nil, err
	}
	req := frame[4:]
	if len(req) < 8 {
		return nil, fmt.Errorf("transporttest: kafka: request of %d bytes, shorter than a request header", len(req))
	}
	key := int16(binary.BigEndian.Uint16(req))
	version := int16(binary.BigEndian.Uint16(req[2:]))
	correlation := int32(binary.BigEndian.Uint32(req[4:]))
	// Request header v0, which only ControlledShutdown v0 has, ends there;
	// v1 adds the client ID, v2 (flexible versions) tagged fields.
	if rest := req[8:]; key != kafkaControlledShutdown || version != 0 {
		if len(rest) < 2 {
			return nil, fmt.Errorf("transporttest: kafka: request %d (key %d) without a client ID", correlation, key)
		}
		n := int(int16(binary.BigEndian.Uint16(rest)))
		if n < -1 || 2+n > len(rest) {
			return nil, fmt.Errorf("transporttest: kafka: request %d (key %d): client ID of %d bytes in %d", correlation, key, n, len(rest)-2)
		}
		rest = rest[2+max(n, 0):]
		// Of the requests with flexible versions the proxy knows only
		// Fetch's (v12 on): the header of any other ends, for the proxy,
		// with the client ID.
		if key == kafkaFetch && version >= kafkaFetchFlexible {
			if _, err := skipKafkaTags(rest); err != nil {
				return nil, fmt.Errorf("transporttest: kafka: request %d (key %d) header: %w", correlation, key, err)
			}
		}
	}
	if key == kafkaFetch {
		c.mu.Lock()
		c.fetches[correlation] = version
		c.mu.Unlock()
	}
	return frame, nil
}

func (c *kafkaConn) FromBroker(r *bufio.Reader, deaf bool) (toClient, toBroker []byte, err error) {
	c.emptied = false
	frame, err := readKafkaFrame(r)
	if err != nil {
		return nil, nil, err
	}
	resp := frame[4:]
	if len(resp) < 4 {
		return nil, nil, fmt.Errorf("transporttest: kafka: response of %d bytes, shorter than a correlation ID", len(resp))
	}
	correlation := int32(binary.BigEndian.Uint32(resp))
	c.mu.Lock()
	version, fetch := c.fetches[correlation]
	delete(c.fetches, correlation)
	c.mu.Unlock()
	if !fetch || !deaf {
		return frame, nil, nil
	}
	header := 4 // response header v0: the correlation ID; v1 adds tagged fields
	if version >= kafkaFetchFlexible {
		n, err := skipKafkaTags(resp[header:])
		if err != nil {
			return nil, nil, fmt.Errorf("transporttest: kafka: fetch response %d header: %w", correlation, err)
		}
		header += n
	}
	body, emptied, err := emptyFetchRecords(resp[header:], version)
	if err != nil {
		return nil, nil, fmt.Errorf("transporttest: kafka: fetch response %d (v%d): %w", correlation, version, err)
	}
	if !emptied {
		return frame, nil, nil
	}
	c.emptied = true
	out := make([]byte, 4, 4+header+len(body))
	out = append(append(out, resp[:header]...), body...)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out, nil, nil
}

// readKafkaFrame reads a request or response with its size prefix, a
// big-endian int32.
func readKafkaFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 0 || n > kafkaMaxFrame {
		return nil, fmt.Errorf("transporttest: kafka: frame of %d bytes", n)
	}
	return readFrame(r, size[:], int(n))
}

var errKafkaTags = errors.New("tagged fields truncated")

// skipKafkaTags returns the length of the tagged fields at the start of b:
// a count, then each field's tag, size and bytes, unsigned varints all but
// the bytes.
func skipKafkaTags(b []byte) (int, error) {
	count, off := binary.Uvarint(b)
	if off <= 0 || count > uint64(len(b)) {
		return 0, errKafkaTags
	}
	for range count {
		_, n := binary.Uvarint(b[off:])
		if n <= 0 {
			return 0, errKafkaTags
		}
		off += n
		size, n := binary.Uvarint(b[off:])
		if n <= 0 || size > uint64(len(b)-off-n) {
			return 0, errKafkaTags
		}
		off += n + int(size)
	}
	return off, nil
}

// emptyFetchRecords returns body, the body of a Fetch response of version,
// with the records of every partition that had any made empty, and whether
// any had. Every other byte stays as the broker sent it: high watermarks,
// last stable offsets, errors, aborted transactions, tagged fields. The
// records are left empty, not null: sarama takes a null records field of a
// version before 12 for a malformed response.
func emptyFetchRecords(body []byte, version int16) ([]byte, bool, error) {
	if version < 0 || version > kafkaFetchNewest {
		return nil, false, fmt.Errorf("version %d: the proxy knows Fetch up to v%d", version, kafkaFetchNewest)
	}
	flexible := version >= kafkaFetchFlexible
	r := &kafkaReader{b: body}
	if version >= 1 {
		r.skip(4) // throttle_time_ms
	}
	if version >= 7 {
		r.skip(2 + 4) // error_code, session_id
	}
	var records [][2]int // where each partition's records that are not empty are, length included
	for range r.arrayLen(flexible) {
		if version >= kafkaFetchTopicIDs {
			r.skip(16) // topic_id
		} else {
			r.skipString(flexible) // topic
		}
		for range r.arrayLen(flexible) {
			r.skip(4 + 2 + 8) // partition_index, error_code, high_watermark
			if version >= 4 {
				r.skip(8) // last_stable_offset
			}
			if version >= 5 {
				r.skip(8) // log_start_offset
			}
			if version >= 4 {
				for range r.arrayLen(flexible) { // aborted_transactions
					r.skip(8 + 8) // producer_id, first_offset
					if flexible {
						r.skipTags()
					}
				}
			}
			if version >= 11 {
				r.skip(4) // preferred_read_replica
			}
			start := r.off
			switch n := r.bytesLen(flexible); {
			case n < -1:
				r.err = fmt.Errorf("records of %d bytes", n)
			case n > 0:
				r.skip(n)
				records = append(records, [2]int{start, r.off})
			}
			if flexible {
				r.skipTags() // diverging_epoch, current_leader, snapshot_id
			}
		}
		if flexible {
			r.skipTags()
		}
	}
	if flexible {
		r.skipTags() // node_endpoints
	}
	if r.err != nil {
		return nil, false, r.err
	}
	if r.off != len(body) {
		return nil, false, fmt.Errorf("%d bytes after the response", len(body)-r.off)
	}
	if len(records) == 0 {
		return body, false, nil
	}
	empty := []byte{0, 0, 0, 0} // an int32 length of 0
	if flexible {
		empty = []byte{1} // a compact length: the length plus 1, as an unsigned varint
	}
	out := make([]byte, 0, len(body))
	last := 0
	for _, rec := range records {
		out = append(append(out, body[last:rec[0]]...), empty...)
		last = rec[1]
	}
	return append(out, body[last:]...), true, nil
}

var errKafkaShort = errors.New("response ends inside a field")

// kafkaReader walks the fields of a Kafka message. The first field that
// runs past the end sets err, after which it reads nothing more: lengths
// and counts read then are 0, so no loop over them goes on.
type kafkaReader struct {
	b   []byte
	off int
	err error
}

func (r *kafkaReader) skip(n int) {
	if r.err != nil {
		return
	}
	if n < 0 || n > len(r.b)-r.off {
		r.err = errKafkaShort
		return
	}
	r.off += n
}

func (r *kafkaReader) int16() int {
	start := r.off
	if r.skip(2); r.err != nil {
		return 0
	}
	return int(int16(binary.BigEndian.Uint16(r.b[start:])))
}

func (r *kafkaReader) int32() int {
	start := r.off
	if r.skip(4); r.err != nil {
		return 0
	}
	return int(int32(binary.BigEndian.Uint32(r.b[start:])))
}

// uvarint reads an unsigned varint that must fit in an int32, as every
// one of Kafka's does.
func (r *kafkaReader) uvarint() int {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 || v > 1<<31-1 {
		r.err = errKafkaShort
		return 0
	}
	r.off += n
	return int(v)
}

// compact reads a compact length (the length plus 1, 0 for null): -1 for
// null.
func (r *kafkaReader) compact() int { return r.uvarint() - 1 }

// arrayLen reads an array's count, 0 for a null array. A count that the
// rest of the message cannot hold (every element takes a byte at least)
// is an error.
func (r *kafkaReader) arrayLen(flexible bool) int {
	var n int
	if flexible {
		n = r.compact()
	} else {
		n = r.int32()
	}
	if r.err != nil || n < 0 {
		return 0
	}
	if n > len(r.b)-r.off {
		r.err = errKafkaShort
		return 0
	}
	return n
}

func (r *kafkaReader) skipString(flexible bool) {
	if flexible {
		r.skip(max(r.compact(), 0))
	} else {
		r.skip(max(r.int16(), 0))
	}
}

// bytesLen reads the length of bytes or records: -1 for null.
func (r *kafkaReader) bytesLen(flexible bool) int {
	if flexible {
		return r.compact()
	}
	return r.int32()
}

func (r *kafkaReader) skipTags() {
	if r.err != nil {
		return
	}
	n, err := skipKafkaTags(r.b[r.off:])
	if err != nil {
		r.err = err
		return
	}
	r.off += n
}
