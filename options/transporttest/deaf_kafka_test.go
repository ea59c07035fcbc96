package transporttest

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchResponse is a Fetch response of version with every field the
// version has set, two partitions of three with records.
func fetchResponse(version int16) *kmsg.FetchResponse {
	r := kmsg.NewPtrFetchResponse()
	r.Version = version
	r.ThrottleMillis, r.SessionID = 5, 77
	partition := func(id int32, records []byte) kmsg.FetchResponseTopicPartition {
		p := kmsg.NewFetchResponseTopicPartition()
		p.Partition, p.HighWatermark, p.LastStableOffset, p.LogStartOffset = id, 42+int64(id), 40+int64(id), 3
		p.RecordBatches = records
		p.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: 7, FirstOffset: 11}}
		p.PreferredReadReplica = 2
		p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset = 4, 30
		p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = 1, 9
		p.UnknownTags.Set(17, []byte("a tag the proxy does not know"))
		return p
	}
	t1 := kmsg.NewFetchResponseTopic()
	t1.Topic, t1.TopicID = "workwire.spec", [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	t1.Partitions = []kmsg.FetchResponseTopicPartition{
		partition(0, bytes.Repeat([]byte("batch-of-partition-0 "), 10)),
		partition(1, nil),
		partition(2, []byte("batch-of-partition-2")),
	}
	noAborted := partition(0, []byte("x"))
	noAborted.AbortedTransactions = nil
	noAborted.ErrorCode = 1 // OFFSET_OUT_OF_RANGE, kept
	t2 := kmsg.NewFetchResponseTopic()
	t2.Topic, t2.TopicID = "workwire.status", [16]byte{9}
	t2.Partitions = []kmsg.FetchResponseTopicPartition{noAborted}
	r.Topics = []kmsg.FetchResponseTopic{t1, t2}
	r.Brokers = []kmsg.FetchResponseBroker{{NodeID: 1, Host: "127.0.0.1", Port: 9092}}
	return r
}

// kafkaResponse frames body as the response to correlation.
func kafkaResponse(correlation int32, flexible bool, body []byte) []byte {
	out := binary.BigEndian.AppendUint32(make([]byte, 4), uint32(correlation))
	if flexible {
		out = append(out, 0) // no tagged fields in the header
	}
	out = append(out, body...)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out
}

func fromBroker(t *testing.T, c ProtocolConn, frame []byte, deaf bool) []byte {
	t.Helper()
	out, back, err := c.FromBroker(bufio.NewReader(bytes.NewReader(frame)), deaf)
	if err != nil || back != nil {
		t.Fatalf("FromBroker: %v (answered %q)", err, back)
	}
	return out
}

// For every Fetch version, a deaf connection empties each partition's
// records and keeps every other byte; a hearing one, and other responses,
// pass untouched.
func TestKafkaFraming(t *testing.T) {
	format := kmsg.NewRequestFormatter(kmsg.FormatterClientID("workwire"))
	for version := int16(0); version <= kafkaFetchNewest; version++ {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			c := Kafka.NewConn()
			flexible := version >= kafkaFetchFlexible
			fetch := func(correlation int32) {
				t.Helper()
				req := kmsg.NewPtrFetchRequest()
				req.Version = version
				frame := format.AppendRequest(nil, req, correlation)
				got, err := c.FromClient(bufio.NewReader(bytes.NewReader(frame)))
				if err != nil || !bytes.Equal(got, frame) {
					t.Fatalf("FromClient: %v, changed %v", err, !bytes.Equal(got, frame))
				}
			}
			resp := fetchResponse(version)
			frame := kafkaResponse(1, flexible, resp.AppendTo(nil))

			fetch(1)
			if got := fromBroker(t, c, frame, false); !bytes.Equal(got, frame) {
				t.Error("a hearing connection changed a Fetch response")
			}
			if c.(dropReporter).droppedLast() {
				t.Error("a hearing connection reported a drop")
			}

			fetch(2)
			got := fromBroker(t, c, kafkaResponse(2, flexible, resp.AppendTo(nil)), true)
			if !c.(dropReporter).droppedLast() {
				t.Error("an emptied response was not reported")
			}
			// What kmsg writes for the response with empty records, byte
			// for byte.
			for i := range resp.Topics {
				for j := range resp.Topics[i].Partitions {
					if p := &resp.Topics[i].Partitions[j]; p.RecordBatches != nil {
						p.RecordBatches = []byte{}
					}
				}
			}
			if want := kafkaResponse(2, flexible, resp.AppendTo(nil)); !bytes.Equal(got, want) {
				t.Fatalf("deaf:\n% x\nwant\n% x", got, want)
			}
			header := 8
			if flexible {
				header++
			}
			decoded := kmsg.NewPtrFetchResponse()
			decoded.Version = version
			if err := decoded.ReadFrom(got[header:]); err != nil {
				t.Fatal(err)
			}
			for _, topic := range decoded.Topics {
				for _, p := range topic.Partitions {
					if len(p.RecordBatches) != 0 || p.HighWatermark != 42+int64(p.Partition) {
						t.Errorf("partition %d: %d bytes of records, high watermark %d", p.Partition, len(p.RecordBatches), p.HighWatermark)
					}
				}
			}

			// Only a Fetch's response is a Fetch response; one with no
			// records passes as it is.
			other := kafkaResponse(3, false, []byte("metadata"))
			if got := fromBroker(t, c, other, true); !bytes.Equal(got, other) || c.(dropReporter).droppedLast() {
				t.Error("deaf, a response to another request changed")
			}
			fetch(4)
			empty := kafkaResponse(4, flexible, resp.AppendTo(nil))
			if got := fromBroker(t, c, empty, true); !bytes.Equal(got, empty) || c.(dropReporter).droppedLast() {
				t.Error("deaf, a Fetch response without records changed")
			}

			// A response cut short anywhere, or with bytes after its end,
			// is malformed.
			body := fetchResponse(version).AppendTo(nil)
			for n := range len(body) {
				if _, _, err := emptyFetchRecords(body[:n], version); err == nil {
					t.Fatalf("a response cut to %d bytes of %d parsed", n, len(body))
				}
			}
			if _, _, err := emptyFetchRecords(append(body, 0), version); err == nil {
				t.Error("a response with a byte after its end parsed")
			}
		})
	}
	if _, _, err := emptyFetchRecords(nil, kafkaFetchNewest+1); err == nil {
		t.Error("a Fetch version newer than the proxy knows parsed")
	}
}

func TestKafkaTags(t *testing.T) {
	for _, tt := range []struct {
		in   []byte
		want int // -1: an error
	}{
		{[]byte{0}, 1},
		{[]byte{0, 0xff}, 1},
		{[]byte{1, 5, 2, 'a', 'b'}, 5},
		{[]byte{2, 0, 0, 1, 1, 'x', 9}, 6},
		{[]byte{}, -1},
		{[]byte{1, 5}, -1},
		{[]byte{1, 5, 3, 'a'}, -1},
		{[]byte{0x80}, -1},
		{[]byte{0xff, 0xff, 0xff, 0xff, 0x0f}, -1},
	} {
		n, err := skipKafkaTags(tt.in)
		if tt.want < 0 && err == nil || tt.want >= 0 && (err != nil || n != tt.want) {
			t.Errorf("% x: %d, %v; want %d", tt.in, n, err, tt.want)
		}
	}
}
