package generic_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options/memory"
)

// gadgetCodec carries widgets as a second data type.
type gadgetCodec struct{ widgetCodec }

var gadgets = types.DataType{Group: "io.example.gadgets", Version: "v1", Resource: "gadgets"}

func (gadgetCodec) DataType() types.DataType { return gadgets }

// The agent client knows the data type each resource came as, already
// while its handlers run (a status they publish at once goes out as it),
// and its status goes back as that data type without the caller naming
// it; a resource it does not know is its first codec's.
func TestAnAgentRoutesAStatusAsTheDataTypeItsSpecCameAs(t *testing.T) {
	broker := memory.NewBroker()
	codecs := []generic.Codec[*widget]{widgetCodec{}, gadgetCodec{}}
	srcStore := newStore(newWidget("hub", "c1", "w1", "a", 1))
	obs := newCounter()
	// The source holds its widgets as gadgets alone: its resync answers
	// send them as nothing else.
	gadgetsOnly := generic.ListerFunc[*widget](func(o generic.ListOptions) ([]*widget, error) {
		if o.DataType == widgets {
			return nil, nil
		}
		return srcStore.List(o)
	})
	src, err := generic.NewSourceClient[*widget]("hub", broker.Transport(), gadgetsOnly, hashWidget, codecs, sourceOpts(obs)...)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		statuses = map[types.DataType]int{}
	)
	if err := src.Subscribe(func(_ context.Context, et types.EventType, _ *widget) error {
		mu.Lock()
		defer mu.Unlock()
		statuses[et.DataType]++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	startClient(t, src.Start, src.Close)

	agent, err := generic.NewAgentClient[*widget]("c1", broker.Transport(), newStore(), hashWidget, codecs, agentOpts(newCounter())...)
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan types.DataType, 1)
	if err := agent.Subscribe(func(ctx context.Context, _ types.EventType, got *widget) error {
		select {
		case seen <- agent.DataTypeOf(string(got.UID)):
		default: // the first call is the one that counts
		}
		got.Status = "done"
		return agent.Publish(ctx, types.EventType{SubResource: types.SubResourceStatus, Action: types.UpdateRequest}, got)
	}); err != nil {
		t.Fatal(err)
	}
	startClient(t, agent.Start, agent.Close)
	if got := agent.DataTypeOf("unknown"); got != widgets {
		t.Errorf("an unknown resource's data type is %v, want the first codec's %v", got, widgets)
	}

	w, _ := srcStore.get("uid-c1-w1")
	if err := src.Publish(context.Background(), types.EventType{DataType: gadgets, SubResource: types.SubResourceSpec, Action: types.CreateRequest}, w); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-seen:
		if got != gadgets {
			t.Errorf("in its handler the spec's data type is %v, want %v", got, gadgets)
		}
	case <-time.After(45 * time.Second): // a bound the test never reaches when it passes
		t.Fatal("the agent never handled the spec")
	}
	eventually(t, "the status to come back as gadgets", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return statuses[gadgets] > 0
	})
	mu.Lock()
	defer mu.Unlock()
	if statuses[widgets] != 0 {
		t.Errorf("%d statuses came back as widgets", statuses[widgets])
	}
}

func sourceOpts(obs generic.Observer) []generic.SourceOption {
	var out []generic.SourceOption
	for _, o := range testOpts(obs) {
		out = append(out, o)
	}
	return out
}

func agentOpts(obs generic.Observer) []generic.AgentOption {
	var out []generic.AgentOption
	for _, o := range testOpts(obs) {
		out = append(out, o)
	}
	return out
}

// versionedCodec carries widgets whose wire version is their "test/version"
// annotation, not their generation, as codec.KubeCodec's is the
// resourceVersion.
type versionedCodec struct{ widgetCodec }

func (versionedCodec) Version(w *widget) int64 {
	v, _ := strconv.ParseInt(w.Annotations["test/version"], 10, 64)
	return v
}

// With a Versioner codec both clients resync by its version: an agent that
// holds a widget at the source's version gets nothing, though its
// generation is older.
func TestResyncComparesTheCodecsVersion(t *testing.T) {
	broker := memory.NewBroker()
	codecs := []generic.Codec[*widget]{versionedCodec{}}
	held := func(gen int64) *widget {
		w := newWidget("hub", "c1", "w1", "a", gen)
		w.Annotations["test/version"] = "7"
		return w
	}
	srcObs := newCounter()
	src, err := generic.NewSourceClient[*widget]("hub", broker.Transport(), newStore(held(3)), hashWidget, codecs, sourceOpts(srcObs)...)
	if err != nil {
		t.Fatal(err)
	}
	startClient(t, src.Start, src.Close)
	agent, err := generic.NewAgentClient[*widget]("c1", broker.Transport(), newStore(held(1)), hashWidget, codecs, agentOpts(newCounter())...)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	specs := 0
	if err := agent.Subscribe(func(context.Context, types.EventType, *widget) error {
		mu.Lock()
		defer mu.Unlock()
		specs++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	startClient(t, agent.Start, agent.Close)
	eventually(t, "the source to answer the agent's spec resync", func() bool { return srcObs.answers() > 0 })
	// The answer is counted once sent: what the source sent is settled.
	if n := srcObs.sends("spec.update_request") + srcObs.sends("spec.create_request"); n != 0 {
		t.Errorf("the source sent %d specs of a widget the agent holds at its version", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if specs != 0 {
		t.Errorf("the agent got %d specs of a widget it holds at the source's version", specs)
	}
}
