package kafka

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/IBM/sarama"
	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/google/go-cmp/cmp"
	metrics "github.com/rcrowley/go-metrics"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/xdg-go/scram"

	"github.com/workwire/sdk-go/options"
)

// Kafka's default partitioner, as franz-go implements it, must place every
// key where PartitionFor says: agents read only that partition.
func TestPartitionForMatchesKafkasDefaultPartitioner(t *testing.T) {
	t.Parallel()
	ref := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	rng := rand.New(rand.NewPCG(1, 2))
	keys := []string{"", "a", "ab", "abc", "abcd", "cluster1", "21", "foobar", "a-little-bit-long-string"}
	for range 2000 {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		keys = append(keys, string(b))
	}
	for _, n := range []int32{1, 3, 4, 10, 64, 1000} {
		for _, k := range keys {
			want := ref.Partition(&kgo.Record{Key: []byte(k)}, int(n))
			if got := PartitionFor(k, n); int(got) != want {
				t.Fatalf("PartitionFor(%q, %d) = %d, Kafka's default partitioner says %d", k, n, got, want)
			}
		}
	}
	p := keyPartitioner{}
	if got, _ := p.Partition(&sarama.ProducerMessage{Key: sarama.StringEncoder("cluster1")}, 10); got != PartitionFor("cluster1", 10) {
		t.Errorf("producer partitioner put cluster1 in %d, want %d", got, PartitionFor("cluster1", 10))
	}
	if _, err := p.Partition(&sarama.ProducerMessage{}, 10); err == nil {
		t.Error("a record without a key was partitioned")
	}
	if !p.RequiresConsistency() {
		t.Error("a key's partition must not depend on which partitions are available")
	}
}

func TestBalancerPlan(t *testing.T) {
	t.Parallel()
	topics := map[string][]int32{"spec": {3, 0, 2, 1}, "statusresync": {0, 1, 2, 3}}
	member := func(ts ...string) sarama.ConsumerGroupMemberMetadata {
		return sarama.ConsumerGroupMemberMetadata{Topics: ts}
	}
	t.Run("a pinned topic gives one partition to one member", func(t *testing.T) {
		b := &balancer{pins: map[string]string{"spec": "cluster1"}}
		plan, err := b.Plan(map[string]sarama.ConsumerGroupMemberMetadata{
			"m1": member("spec", "statusresync"), "m2": member("spec", "statusresync"),
		}, topics)
		if err != nil {
			t.Fatal(err)
		}
		var spec []int32
		all := map[int32]int{}
		for _, ts := range plan {
			spec = append(spec, ts["spec"]...)
			for _, p := range ts["statusresync"] {
				all[p]++
			}
		}
		if want := []int32{PartitionFor("cluster1", 4)}; !cmp.Equal(spec, want) {
			t.Errorf("spec partitions assigned %v, want %v", spec, want)
		}
		if len(all) != 4 || len(plan["m1"]["statusresync"]) != 2 {
			t.Errorf("statusresync not dealt over both members: %v", plan)
		}
		for p, n := range all {
			if n != 1 {
				t.Errorf("statusresync partition %d assigned %d times", p, n)
			}
		}
	})
	t.Run("only members subscribed to a topic get its partitions", func(t *testing.T) {
		b := &balancer{}
		plan, err := b.Plan(map[string]sarama.ConsumerGroupMemberMetadata{
			"m1": member("spec"), "m2": member("statusresync"),
		}, topics)
		if err != nil {
			t.Fatal(err)
		}
		if len(plan["m1"]["spec"]) != 4 || len(plan["m1"]["statusresync"]) != 0 || len(plan["m2"]["statusresync"]) != 4 {
			t.Errorf("plan %v", plan)
		}
	})
}

func TestPlanFor(t *testing.T) {
	t.Parallel()
	tr := &Transport{cfg: Config{}}
	tests := []struct {
		name    string
		cfg     Config
		subs    []options.Subscription
		group   string
		pins    map[string]string
		wantErr string
	}{
		{name: "agent", subs: options.AgentSubscriptions("c1", nil), group: "workwire.agent.c1",
			pins: map[string]string{DefaultSpecTopic: "c1"}},
		{name: "source", subs: options.SourceSubscriptions("hub", nil), group: "workwire.source.hub",
			pins: map[string]string{}},
		{name: "agent reading all partitions", cfg: Config{ReadAllPartitions: true}, subs: options.AgentSubscriptions("c1", nil),
			group: "workwire.agent.c1", pins: map[string]string{}},
		{name: "prefix", cfg: Config{GroupPrefix: "prod"}, subs: options.AgentSubscriptions("c1", nil), group: "prod.agent.c1",
			pins: map[string]string{DefaultSpecTopic: "c1"}},
		{name: "explicit group", cfg: Config{GroupID: "mine"}, subs: options.SourceSubscriptions("hub", nil), group: "mine",
			pins: map[string]string{}},
		{name: "no subscriptions", pins: map[string]string{}},
		{name: "two clusters", subs: append(options.AgentSubscriptions("c1", nil), options.AgentSubscriptions("c2", nil)...),
			wantErr: "set Config.GroupID"},
		{name: "no IDs", subs: []options.Subscription{{Role: options.RoleSpec}}, wantErr: "set Config.GroupID"},
		{name: "unknown role", subs: []options.Subscription{{Role: 9, Cluster: "c"}}, wantErr: "unknown role"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr.cfg = tt.cfg.withDefaults()
			p, err := tr.planFor(tt.subs)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want it to say %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.groupID != tt.group || !cmp.Equal(p.pins, tt.pins) {
				t.Errorf("group %q pins %v, want %q %v", p.groupID, p.pins, tt.group, tt.pins)
			}
		})
	}
}

func TestRouteAndMatch(t *testing.T) {
	t.Parallel()
	tr := &Transport{}
	agent, err := tr.planFor(options.AgentSubscriptions("c1", nil))
	if err != nil {
		t.Fatal(err)
	}
	source, err := tr.planFor(options.SourceSubscriptions("hub", nil))
	if err != nil {
		t.Fatal(err)
	}
	rec := func(key string, headers ...string) *sarama.ConsumerMessage {
		m := &sarama.ConsumerMessage{Key: []byte(key)}
		for i := 0; i+1 < len(headers); i += 2 {
			m.Headers = append(m.Headers, &sarama.RecordHeader{Key: []byte(headers[i]), Value: []byte(headers[i+1])})
		}
		return m
	}
	tests := []struct {
		name  string
		p     *plan
		role  options.Role
		m     *sarama.ConsumerMessage
		route options.Route
		match bool
	}{
		{"spec for my cluster", agent, options.RoleSpec, rec("c1", SourceHeader, "hub"),
			options.Route{Role: options.RoleSpec, Source: "hub", Cluster: "c1"}, true},
		{"spec for another cluster", agent, options.RoleSpec, rec("c2", SourceHeader, "hub"),
			options.Route{Role: options.RoleSpec, Source: "hub", Cluster: "c2"}, false},
		{"spec without key, clustername says mine", agent, options.RoleSpec, rec("", "ce_clustername", "c1"),
			options.Route{Role: options.RoleSpec}, true},
		{"spec without key, clustername says another", agent, options.RoleSpec, rec("", "ce_clustername", "c2"),
			options.Route{Role: options.RoleSpec}, false},
		{"spec naming nothing: the receiver decides", agent, options.RoleSpec, rec(""),
			options.Route{Role: options.RoleSpec}, true},
		{"status resync from any source", agent, options.RoleStatusResync, rec("hub"),
			options.Route{Role: options.RoleStatusResync, Source: "hub"}, true},
		{"status for me", source, options.RoleStatus, rec("c1", SourceHeader, "hub"),
			options.Route{Role: options.RoleStatus, Source: "hub", Cluster: "c1"}, true},
		{"status for another source", source, options.RoleStatus, rec("c1", SourceHeader, "other"),
			options.Route{Role: options.RoleStatus, Source: "other", Cluster: "c1"}, false},
		{"status without header, originalsource says another", source, options.RoleStatus, rec("c1", "ce_originalsource", "other"),
			options.Route{Role: options.RoleStatus, Cluster: "c1"}, false},
		{"spec resync from any cluster", source, options.RoleSpecResync, rec("c9"),
			options.Route{Role: options.RoleSpecResync, Cluster: "c9"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := routeOf(tt.role, tt.m)
			if r != tt.route {
				t.Errorf("route %+v, want %+v", r, tt.route)
			}
			if got := tt.p.match(tt.role, r, tt.m); got != tt.match {
				t.Errorf("match = %v, want %v", got, tt.match)
			}
		})
	}
}

// fakeSession records marked offsets.
type fakeSession struct {
	sarama.ConsumerGroupSession
	mu     sync.Mutex
	marked []int64
}

func (s *fakeSession) MarkOffset(_ string, _ int32, offset int64, _ string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.marked = append(s.marked, offset)
}

func (s *fakeSession) last() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.marked) == 0 {
		return -1
	}
	return s.marked[len(s.marked)-1]
}

func TestTrackerMarksInOrder(t *testing.T) {
	t.Parallel()
	sess := &fakeSession{}
	tr := newTracker(sess, "t", 0, 3)
	d10, d11, d13 := tr.add(10), tr.add(11), tr.add(13) // offsets need not be contiguous
	if tr.waitRoom(canceled()) {
		t.Fatal("room with 3 of 3 pending")
	}
	d11()
	if got := sess.last(); got != -1 {
		t.Fatalf("marked %d while offset 10 is pending", got)
	}
	d13()
	d10()
	if got := sess.last(); got != 14 {
		t.Fatalf("marked %d, want 14 (after 13)", got)
	}
	if n, _ := tr.pendingCount(); n != 0 || !tr.waitRoom(canceled()) {
		t.Fatalf("%d pending after all Done", n)
	}
	d10() // a second Done is ignored
	d20 := tr.add(20)
	tr.close()
	d20()
	if got := sess.last(); got != 14 {
		t.Errorf("marked %d after the session ended", got)
	}
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func TestTrackerConcurrentDone(t *testing.T) {
	t.Parallel()
	sess := &fakeSession{}
	tr := newTracker(sess, "t", 0, 1<<20)
	const n = 10000
	dones := make([]func(), n)
	for i := range n {
		dones[i] = tr.add(int64(i))
	}
	rand.Shuffle(n, func(i, j int) { dones[i], dones[j] = dones[j], dones[i] })
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				dones[i]()
			}
		})
	}
	wg.Wait()
	if got := sess.last(); got != n {
		t.Fatalf("last mark %d, want %d", got, n)
	}
	for i := 1; i < len(sess.marked); i++ {
		if sess.marked[i] <= sess.marked[i-1] {
			t.Fatalf("marks went backwards: %v", sess.marked[i-1:i+1])
		}
	}
}

// RFC 7677 section 3: SCRAM-SHA-256 with user "user", password "pencil".
func TestSCRAMRFC7677(t *testing.T) {
	t.Parallel()
	c := &scramClient{hash: scram.SHA256, nonce: func() string { return "rOprNGfwEbeRWgbNEkqO" }}
	if err := c.Begin("user", "pencil", ""); err != nil {
		t.Fatal(err)
	}
	first, err := c.Step("")
	if err != nil || first != "n,,n=user,r=rOprNGfwEbeRWgbNEkqO" {
		t.Fatalf("client-first %q, %v", first, err)
	}
	final, err := c.Step("r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
	want := "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
	if err != nil || final != want {
		t.Fatalf("client-final %q, %v; want %q", final, err, want)
	}
	if c.Done() {
		t.Fatal("done before the server's signature")
	}
	if _, err := c.Step("v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="); err != nil || !c.Done() {
		t.Fatalf("server-final: %v, done %v", err, c.Done())
	}
}

func TestSCRAMRejectsBadServers(t *testing.T) {
	t.Parallel()
	const good = "r=abcdefXYZ,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
	for _, tt := range []struct{ name, first, final, want string }{
		{"foreign nonce", "r=zzzzzzXYZ,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "", "nonce"},
		{"no iterations", "r=abcdefXYZ,s=W22ZaJ0SNY7soEsUEjb6gQ==", "", "iteration"},
		{"huge iterations", "r=abcdefXYZ,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=2000000000", "", "iteration"},
		{"too few iterations", "r=abcdefXYZ,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=1", "", "iterations"},
		{"bad salt", "r=abcdefXYZ,s=!!,i=4096", "", "'s'"},
		{"server error first", "e=other-error", "", "server error"},
		{"wrong signature", good, "v=AAAA", "validation failed"},
		{"server error final", good, "e=invalid-proof", "invalid-proof"},
		{"no verifier", good, "x=1", "x=1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &scramClient{hash: scram.SHA256, nonce: func() string { return "abcdef" }}
			_ = c.Begin("u", "p", "")
			if _, err := c.Step(""); err != nil {
				t.Fatal(err)
			}
			_, err := c.Step(tt.first)
			if tt.final != "" {
				if err != nil {
					t.Fatal(err)
				}
				_, err = c.Step(tt.final)
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err %v, want it to mention %q", err, tt.want)
			}
			if c.Done() {
				t.Error("done after a failed exchange")
			}
		})
	}
}

func TestSCRAMEscapesNames(t *testing.T) {
	t.Parallel()
	c := &scramClient{hash: scram.SHA256, nonce: func() string { return "n" }}
	_ = c.Begin("a,b=c", "p", "z=1")
	first, _ := c.Step("")
	if want := "n,a=z=3D1,n=a=2Cb=3Dc,r=n"; first != want {
		t.Errorf("client-first %q, want %q", first, want)
	}
}

func TestNopRegistryKeepsNothing(t *testing.T) {
	t.Parallel()
	r := nopRegistry{}
	if _, ok := metrics.GetOrRegisterMeter("m", r).(metrics.NilMeter); !ok {
		t.Error("meter is not a no-op")
	}
	if _, ok := metrics.GetOrRegisterCounter("c", r).(metrics.NilCounter); !ok {
		t.Error("counter is not a no-op")
	}
	h := r.GetOrRegister("h", func() metrics.Histogram { return metrics.NewHistogram(metrics.NewUniformSample(1)) })
	if _, ok := h.(metrics.NilHistogram); !ok {
		t.Errorf("histogram %T is not a no-op", h)
	}
	if got := r.GetOrRegister("x", func() string { return "made" }); got != "made" {
		t.Errorf("another constructor gave %v", got)
	}
	if got := r.GetOrRegister("x", 42); got != 42 {
		t.Errorf("a metric value came back as %v", got)
	}
	if r.Get("m") != nil || len(r.GetAll()) != 0 {
		t.Error("the registry kept something")
	}
}

func TestPermanentErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("%w: %w", sarama.ErrOutOfBrokers, sarama.ErrSASLAuthenticationFailed), true},
		{fmt.Errorf("%w: %w", sarama.ErrOutOfBrokers, x509.UnknownAuthorityError{}), true},
		{fmt.Errorf("%w: %w", sarama.ErrOutOfBrokers, &tls.CertificateVerificationError{}), true},
		{fmt.Errorf("%w: %w", sarama.ErrOutOfBrokers, io.EOF), false},
		{sarama.ErrOutOfBrokers, false},
	} {
		if got := permanent(tt.err); got != tt.want {
			t.Errorf("permanent(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

func TestSendErrorClasses(t *testing.T) {
	t.Parallel()
	evt := cloudevents.New()
	for _, tt := range []struct {
		err  error
		want error
	}{
		{sarama.ErrMessageSizeTooLarge, options.ErrTooLarge},
		{sarama.ErrMessageSetSizeTooLarge, options.ErrTooLarge},
		{sarama.ErrShuttingDown, options.ErrClosed},
		{sarama.ErrOutOfBrokers, options.ErrNotConnected},
		{sarama.ErrNotLeaderForPartition, options.ErrNotConnected},
		{io.EOF, options.ErrNotConnected},
		{sarama.ErrTopicAuthorizationFailed, nil},
	} {
		got := sendError("t", &evt, tt.err)
		if !errors.Is(got, tt.err) {
			t.Errorf("%v lost its cause: %v", tt.err, got)
		}
		for _, s := range []error{options.ErrTooLarge, options.ErrClosed, options.ErrNotConnected} {
			if errors.Is(got, s) != (s == tt.want) {
				t.Errorf("sendError(%v) = %v; wraps %v: %v, want %v", tt.err, got, s, errors.Is(got, s), s == tt.want)
			}
		}
	}
}
