package pubsub

import (
	"context"
	"testing"

	gpubsub "cloud.google.com/go/pubsub/v2"
	"github.com/go-logr/logr"
	"google.golang.org/grpc/stats"

	"github.com/workwire/sdk-go/options/transporttest"
)

// TestConnWatcher feeds the stats handler connection events in the orders
// gRPC can report them, and checks when the transport reports the service
// lost and back.
func TestConnWatcher(t *testing.T) {
	type step struct {
		begin bool // else end
		conn  int  // index into the connections tagged so far
	}
	begin := func(c int) step { return step{true, c} }
	end := func(c int) step { return step{false, c} }
	for _, tc := range []struct {
		name     string
		steps    []step
		connects int  // Connected calls after Start's
		healthy  bool // at the end
	}{
		{"replaced after its end", []step{begin(0), end(0), begin(1)}, 1, true},
		// gRPC starts a replacement before it reports the end of the
		// connection it replaces.
		{"replaced before its end", []step{begin(0), begin(1), end(0)}, 1, true},
		{"lost", []step{begin(0), end(0)}, 0, false},
		{"an older connection stays open", []step{begin(0), begin(1), end(1)}, 0, true},
		{"every connection of a pool replaced", []step{begin(0), begin(1), end(1), begin(2), end(0)}, 1, true},
		{"the last of a pool lost", []step{begin(0), begin(1), end(1), end(0)}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := New(Config{ProjectID: "fleet-prod"}, WithLogger(logr.Discard()))
			if err != nil {
				t.Fatal(err)
			}
			r := transporttest.NewRecorder()
			tr.started, tr.recv = true, r
			h := connWatcher{tr}
			var conns []context.Context
			for i, s := range tc.steps {
				for len(conns) <= s.conn {
					conns = append(conns, h.TagConn(context.Background(), &stats.ConnTagInfo{}))
				}
				if s.begin {
					h.HandleConn(conns[s.conn], &stats.ConnBegin{Client: true})
				} else {
					h.HandleConn(conns[s.conn], &stats.ConnEnd{Client: true})
				}
				if i == 0 { // as Start does once the service answered
					tr.client, tr.up = &gpubsub.Client{}, len(tr.conns) > 0
					tr.tracker.Connected()
				}
			}
			if got := r.Connects(); got != tc.connects {
				t.Errorf("Connected %d times, want %d", got, tc.connects)
			}
			if err := tr.Healthy(); (err == nil) != tc.healthy {
				t.Errorf("Healthy() = %v, want healthy %t", err, tc.healthy)
			}
		})
	}
}
