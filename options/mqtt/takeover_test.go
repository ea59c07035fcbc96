package mqtt_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/options/mqtt/mqtttest"
	"github.com/workwire/sdk-go/options/transporttest"
)

// Two transports with one client ID take each other's connection: each
// says so at the default log level, naming the ID, and so does Healthy
// while it is down.
func TestAClientIDTakeoverIsNamed(t *testing.T) {
	t.Parallel()
	b := mqtttest.NewBroker(t)
	var mu sync.Mutex
	var lines []string
	logger := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, args)
	}, funcr.Options{}) // the default level only
	cfg := mqtt.Config{BrokerHost: b.Addr(), ClientID: "twice",
		ReconnectMinBackoff: options.Duration(time.Second), ReconnectMaxBackoff: options.Duration(time.Second)}
	first, err := mqtt.New(cfg, mqtt.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	r := transporttest.Start(t, first, nil)
	transporttest.Start(t, newTransport(t, cfg), nil) // takes the session over
	const want = `the broker disconnected us: reason code 0x8e: session taken over: another connection uses client ID \"twice\", and each connection needs one of its own`
	r.Wait(t, "the takeover logged", 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, l := range lines {
			if strings.Contains(l, `"msg"="connection lost; reconnecting"`) && strings.Contains(l, want) {
				return true
			}
		}
		return false
	})
}
