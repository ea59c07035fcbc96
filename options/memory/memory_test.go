package memory_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/memory"
	"github.com/workwire/sdk-go/options/transporttest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	b := memory.NewBroker()
	transporttest.Run(t, transporttest.Harness{
		New:     func(*testing.T) options.Transport { return b.Transport() },
		Restart: func(*testing.T) { b.Restart() },
		SendRaw: func(_ *testing.T, r options.Route, payload []byte) { b.SendRaw(r, payload) },
	})
}
