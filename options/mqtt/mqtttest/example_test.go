package mqtttest_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/options/mqtt/mqtttest"
)

func TestBrokerRestartKeepsItsAddress(t *testing.T) {
	b := mqtttest.NewBroker(t)
	addr := b.Addr()
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("address %q", addr)
	}
	if err := b.Restart(); err != nil {
		t.Fatal(err)
	}
	if b.Addr() != addr {
		t.Fatalf("restarted on %s, was %s", b.Addr(), addr)
	}
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := b.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

// Start runs a broker for a program (the quickstart uses it); in a test,
// NewBroker(t) does the same and closes it when the test ends.
func ExampleStart() {
	b, err := mqtttest.Start()
	if err != nil {
		panic(err)
	}
	defer b.Close()
	cfg := mqtt.Config{BrokerHost: b.Addr()}
	fmt.Println(strings.HasPrefix(cfg.BrokerHost, "127.0.0.1:"))
	// Output: true
}
