package kafka

import (
	"encoding/binary"
	"errors"

	"github.com/IBM/sarama"
)

// PartitionFor returns the partition of a topic with n partitions (n > 0)
// that an event with message key key goes to: Kafka's default partitioner
// for keyed records (murmur2 of the key, made non-negative, modulo n), the
// one of the Java client and of franz-go. Agents read only the partition of
// their cluster name; producers in other languages that keep Kafka's default
// partitioner place events where agents read them.
func PartitionFor(key string, n int32) int32 {
	if n <= 0 {
		return 0
	}
	return int32(murmur2([]byte(key))&0x7fffffff) % n
}

// murmur2 is the 32-bit MurmurHash2 with the seed Kafka uses.
func murmur2(data []byte) uint32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	h := seed ^ uint32(len(data))
	for len(data) >= 4 {
		k := binary.LittleEndian.Uint32(data)
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
		data = data[4:]
	}
	switch len(data) {
	case 3:
		h ^= uint32(data[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}

// keyPartitioner is the producer's partitioner: PartitionFor of the key,
// over all partitions of the topic (available or not), so a key's partition
// does not move while a broker is down.
type keyPartitioner struct{}

func newKeyPartitioner(string) sarama.Partitioner { return keyPartitioner{} }

func (keyPartitioner) Partition(msg *sarama.ProducerMessage, n int32) (int32, error) {
	if msg.Key == nil {
		return 0, errors.New("kafka: message without a key")
	}
	key, err := msg.Key.Encode()
	if err != nil {
		return 0, err
	}
	return PartitionFor(string(key), n), nil
}

func (keyPartitioner) RequiresConsistency() bool { return true }
