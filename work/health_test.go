package work_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/options/mqtt/mqtttest"
	"github.com/workwire/sdk-go/options/transporttest"
)

// Healthy is what a readiness probe reads: why a holder is not ready while
// its broker is down, nil once Start returned, the loss of the broker
// later, and ErrClosed after Close.
func TestHolderHealthFollowsItsBroker(t *testing.T) {
	h, err := agentBuilder(&mqtt.Config{BrokerHost: transporttest.ClosedAddr(t)}, "cluster1").NewClientHolder()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Healthy(); !errors.Is(err, generic.ErrNotStarted) {
		t.Errorf("Healthy before Start: %v, want ErrNotStarted", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan error, 1)
	go func() { started <- h.Start(ctx) }()
	eventually(t, "Healthy to report the refused connection", func() bool {
		err := h.Healthy()
		return errors.Is(err, options.ErrNotConnected) && strings.Contains(err.Error(), "connection refused")
	})
	cancel()
	if err := <-started; err == nil {
		t.Error("Start against a dead broker succeeded")
	}
	closeHolder(t, h)
	if err := h.Healthy(); !errors.Is(err, generic.ErrClosed) {
		t.Errorf("Healthy after Close: %v, want ErrClosed", err)
	}

	broker, err := mqtttest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	h = startHolder(t, hubBuilder(&mqtt.Config{BrokerHost: broker.Addr()}, "hub1"))
	if err := h.Healthy(); err != nil {
		t.Errorf("Healthy after Start: %v", err)
	}
	_ = broker.Close()
	eventually(t, "Healthy to report the lost broker", func() bool { return errors.Is(h.Healthy(), options.ErrNotConnected) })
}
