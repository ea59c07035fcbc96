package ack

import (
	"strconv"
	"testing"
	"time"
)

// What tracking costs a spec on the hot path: its send and its
// acknowledgement, 100 agents, 10,000 specs in flight.
func BenchmarkSendAndAcknowledge(b *testing.B) {
	tr := New(Config{After: 30 * time.Second, Max: 10 * time.Minute, PerRound: 500})
	ids := make([]string, 10000)
	peers := make([]Peer, 100)
	for i := range ids {
		ids[i] = strconv.Itoa(i)
	}
	for i := range peers {
		peers[i] = Peer{Cluster: "cluster-" + strconv.Itoa(i), DataType: "dt"}
	}
	now := t0
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		p, id := peers[i%len(peers)], ids[i%len(ids)]
		tr.Send(p, id, int64(i), true, nil, now)
		if i >= len(ids) {
			j := i - len(ids)
			tr.Acked(peers[j%len(peers)], ids[j%len(ids)], int64(j), now)
		}
	}
}
