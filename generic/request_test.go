package generic_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/go-logr/logr"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options/grpc"
	"github.com/workwire/sdk-go/options/grpc/grpctest"
	"github.com/workwire/sdk-go/options/grpc/server"
)

// joinService is a broker Service of widgets an agent writes itself.
type joinService struct {
	*server.MemoryService
	mu  sync.Mutex
	got []types.EventType
}

func (s *joinService) HandleStatusUpdate(_ context.Context, evt *cloudevents.Event) error {
	t, err := types.ParseEventType(evt.Type())
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, t)
	return nil
}

// An agent writes what it owns through the broker's Service: a spec create
// or update request goes to it, and Publish returns once the Service has
// it. A delete request is not an agent's to send.
func TestAnAgentAsksTheServiceToWriteWhatItOwns(t *testing.T) {
	svc := &joinService{MemoryService: server.NewMemoryService(widgets.String())}
	srv := grpctest.NewServer(t, server.WithService(widgets.String(), svc))
	tr, err := grpc.New(srv.Config(), grpc.WithLogger(logr.Discard()))
	if err != nil {
		t.Fatal(err)
	}
	agent, err := generic.NewAgentClient[*widget]("c1", tr, newStore(), hashWidget, []generic.Codec[*widget]{widgetCodec{}}, agentOpts(newCounter())...)
	if err != nil {
		t.Fatal(err)
	}
	startClient(t, agent.Start, agent.Close)
	ctx := context.Background()
	w := newWidget("", "c1", "mine", "joined", 1)
	for _, action := range []types.Action{types.CreateRequest, types.UpdateRequest} {
		if err := agent.Publish(ctx, types.EventType{DataType: widgets, SubResource: types.SubResourceSpec, Action: action}, w); err != nil {
			t.Fatalf("%s: %v", action, err)
		}
	}
	err = agent.Publish(ctx, types.EventType{DataType: widgets, SubResource: types.SubResourceSpec, Action: types.DeleteRequest}, w)
	if !errors.Is(err, generic.ErrWrongEventType) {
		t.Errorf("an agent's delete request: %v, want ErrWrongEventType", err)
	}
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if len(svc.got) != 2 || svc.got[0].Action != types.CreateRequest || svc.got[1].Action != types.UpdateRequest {
		t.Errorf("the Service got %v, want the create and the update", svc.got)
	}
}
