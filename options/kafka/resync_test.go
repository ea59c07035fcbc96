package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/go-logr/logr"

	"github.com/workwire/sdk-go/internal/connstate"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/transporttest"
)

// stubSession is a consumer group session with fixed claims.
type stubSession struct {
	fakeSession
	claims map[string][]int32
	ctx    context.Context
}

func (s *stubSession) Claims() map[string][]int32               { return s.claims }
func (s *stubSession) GenerationID() int32                      { return 1 }
func (s *stubSession) Context() context.Context                 { return s.ctx }
func (s *stubSession) Commit()                                  {}
func (s *stubSession) ResetOffset(string, int32, int64, string) {}

// stubClaim is a claim with no records.
type stubClaim struct {
	topic     string
	partition int32
	initial   int64
}

func (c *stubClaim) Topic() string                            { return c.topic }
func (c *stubClaim) Partition() int32                         { return c.partition }
func (c *stubClaim) InitialOffset() int64                     { return c.initial }
func (c *stubClaim) HighWaterMarkOffset() int64               { return 7 }
func (c *stubClaim) Messages() <-chan *sarama.ConsumerMessage { return nil }

// session is one consumer group session as the handler sees it.
type session struct {
	claims map[string][]int32
	// fresh names claims without a committed offset ("topic/partition").
	fresh map[string]bool
	// joinErr fails the join: Consume returns it before any session.
	joinErr error
	// abort ends the session before its claims consume.
	abort bool
	// cause is why the session ends, as sarama gives it.
	cause error
}

// run drives h through s the way sarama and Transport.consume do.
func (s session) run(t *testing.T, h *groupHandler) {
	t.Helper()
	_, leave := h.newSession(context.Background())
	defer leave(nil)
	if s.joinErr != nil {
		h.ended(s.joinErr)
		return
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	sess := &stubSession{claims: s.claims, ctx: ctx}
	if err := h.Setup(sess); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	if !s.abort {
		for topic, parts := range s.claims {
			for _, p := range parts {
				initial := int64(3)
				if s.fresh[fmt.Sprint(topic, "/", p)] {
					initial = sarama.OffsetNewest
				}
				wg.Go(func() {
					if err := h.ConsumeClaim(sess, &stubClaim{topic: topic, partition: p, initial: initial}); err != nil {
						t.Error(err)
					}
				})
			}
		}
		for deadline := time.Now().Add(10 * time.Second); !h.sessionComplete(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the session's claims never all consumed")
			}
		}
	}
	cancel(s.cause)
	wg.Wait()
	if err := h.Cleanup(sess); err != nil {
		t.Fatal(err)
	}
	h.ended(nil)
}

// A rebalance makes a member resync only when it gives it spec or status
// partitions it did not read in the session before (or without a committed
// offset); a member that keeps or only loses partitions resumes at its
// committed offsets and is not told. A failed membership is a reconnect.
func TestResyncOnlyWhereARebalanceGivesPartitions(t *testing.T) {
	t.Parallel()
	const spec, resync = DefaultSpecTopic, DefaultStatusResyncTopic
	rebalance := sarama.ErrRebalanceInProgress
	steps := []struct {
		name string
		s    session
		want Stats // cumulative
	}{
		{"first session", session{claims: map[string][]int32{spec: {2}, resync: {0, 1, 2, 3}}, cause: rebalance},
			Stats{Sessions: 1, Connects: 1}},
		{"same partitions", session{claims: map[string][]int32{spec: {2}, resync: {0, 1, 2, 3}}, cause: rebalance},
			Stats{Sessions: 2, Connects: 1}},
		{"standby: spec partition given up", session{claims: map[string][]int32{resync: {0, 1}}, cause: rebalance},
			Stats{Sessions: 3, Connects: 1}},
		{"more status resync partitions only", session{claims: map[string][]int32{resync: {0, 1, 2, 3}}, cause: rebalance},
			Stats{Sessions: 4, Connects: 1}},
		{"spec partition taken over", session{claims: map[string][]int32{spec: {2}, resync: {0, 1}}, cause: sarama.ErrSessionPartitionCountChanged},
			Stats{Sessions: 5, Connects: 1, RebalanceResyncs: 1}},
		{"kept, but without a committed offset", session{claims: map[string][]int32{spec: {2}, resync: {0, 1}}, fresh: map[string]bool{spec + "/2": true}, cause: rebalance},
			Stats{Sessions: 6, Connects: 1, RebalanceResyncs: 2}},
		{"status resync partition without a committed offset", session{claims: map[string][]int32{spec: {2}, resync: {0, 1}}, fresh: map[string]bool{resync + "/0": true}, cause: fmt.Errorf("heartbeat: %w", sarama.ErrUnknownMemberId)},
			Stats{Sessions: 7, Connects: 1, RebalanceResyncs: 2}},
		{"after the coordinator expired the membership", session{claims: map[string][]int32{spec: {2}, resync: {0, 1}}, cause: rebalance},
			Stats{Sessions: 8, Connects: 2, RebalanceResyncs: 2}},
		{"failed join", session{joinErr: sarama.ErrOutOfBrokers},
			Stats{Sessions: 8, Connects: 2, RebalanceResyncs: 2}},
		{"after a failed join", session{claims: map[string][]int32{spec: {2}, resync: {0, 1}}, cause: rebalance},
			Stats{Sessions: 9, Connects: 3, RebalanceResyncs: 2}},
		{"spec partition gained, session ends before it reads", session{claims: map[string][]int32{spec: {1, 2}}, abort: true, cause: rebalance},
			Stats{Sessions: 9, Connects: 3, RebalanceResyncs: 2}},
		{"the resync is still owed", session{claims: map[string][]int32{spec: {1, 2}}, cause: rebalance},
			Stats{Sessions: 10, Connects: 4, RebalanceResyncs: 2}},
		{"heartbeat failed", session{claims: map[string][]int32{spec: {1, 2}}, cause: sarama.ErrSessionHeartbeatFailed},
			Stats{Sessions: 11, Connects: 4, RebalanceResyncs: 2}},
		{"after the heartbeat failed", session{claims: map[string][]int32{spec: {1, 2}}, cause: rebalance},
			Stats{Sessions: 12, Connects: 5, RebalanceResyncs: 2}},
	}
	tr := &Transport{log: logr.Discard(), tracker: connstate.New(logr.Discard(), "test")}
	p, err := tr.planFor(options.AgentSubscriptions("c1", nil))
	if err != nil {
		t.Fatal(err)
	}
	r := transporttest.NewRecorder()
	tr.recv = r
	h := newGroupHandler(tr, p)
	for _, step := range steps {
		step.s.run(t, h)
		got := tr.Stats()
		if got != step.want {
			t.Fatalf("%s: stats %+v, want %+v", step.name, got, step.want)
		}
		if n := uint64(r.Connects()); n != got.Connects+got.RebalanceResyncs {
			t.Fatalf("%s: Connected called %d times, stats count %d", step.name, n, got.Connects+got.RebalanceResyncs)
		}
	}
}

func TestSessionEndCauses(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		cause      error
		err        error
		complete   bool
		rebalanced bool
	}{
		{sarama.ErrRebalanceInProgress, nil, true, true},
		{sarama.ErrSessionPartitionCountChanged, nil, true, true},
		{sarama.ErrSessionHeartbeatFailed, nil, true, false},
		{sarama.ErrUnknownMemberId, nil, true, false},
		{sarama.ErrSessionConsumeClaimExited, nil, true, false},
		{context.Canceled, nil, true, false},
		{sarama.ErrRebalanceInProgress, errors.New("release failed"), true, false},
		{sarama.ErrRebalanceInProgress, nil, false, false},
	} {
		h := newGroupHandler(&Transport{tracker: connstate.New(logr.Discard(), "test")}, &plan{})
		h.due = resyncNone
		h.complete, h.endCause = tt.complete, tt.cause
		complete, rebalanced := h.ended(tt.err)
		if complete != (tt.complete && tt.err == nil) || rebalanced != tt.rebalanced {
			t.Errorf("cause %v, err %v: complete %v rebalanced %v, want %v %v", tt.cause, tt.err, complete, rebalanced, tt.complete && tt.err == nil, tt.rebalanced)
		}
		if want := map[bool]resync{true: resyncNone, false: resyncConnect}[tt.rebalanced]; h.due != want {
			t.Errorf("cause %v, err %v: owes %v, want %v", tt.cause, tt.err, h.due, want)
		}
	}
}
