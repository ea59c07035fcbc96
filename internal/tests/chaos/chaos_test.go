// Package chaos runs the chaos suite of internal/testsupport/chaos over
// every transport of the main module: the memory broker, embedded MQTT, a
// real Mosquitto, gRPC and Kafka. Its package documentation says what a
// run checks, its modes and how a seed replays a run:
//
//	go test ./internal/tests/chaos                         # default, as CI runs it
//	go test -short ./internal/tests/chaos                  # smaller
//	WORKWIRE_CHAOS=long go test ./internal/tests/chaos -v  # thousands of works, minutes
//	WORKWIRE_CHAOS_SEED=42 go test ./internal/tests/chaos  # replay a seed
//
// TestChaosOverMosquitto runs against a private Mosquitto; it is skipped
// when none is installed, unless WORKWIRE_MQTT_BROKER is set (as in CI), in
// which case a missing Mosquitto fails it.
package chaos

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"

	"github.com/workwire/sdk-go/internal/testsupport/chaos"
	"github.com/workwire/sdk-go/internal/testsupport/mosquitto"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc"
	"github.com/workwire/sdk-go/options/grpc/grpctest"
	"github.com/workwire/sdk-go/options/grpc/server"
	"github.com/workwire/sdk-go/options/kafka"
	"github.com/workwire/sdk-go/options/kafka/kafkatest"
	"github.com/workwire/sdk-go/options/memory"
	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/options/mqtt/mqtttest"
	"github.com/workwire/sdk-go/options/transporttest"
)

// sarama (Kafka) starts go-metrics' process-wide meter goroutine.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"))
}

// In memory: the broker drops, duplicates, reorders and delays events,
// refuses events over 256 KiB (so resyncs of thousands of works must come
// in batches), and restarts; agents and the hub restart.
func TestChaosInMemory(t *testing.T) {
	b := memory.NewBroker(memory.WithMaxEventBytes(256 << 10))
	chaos.Run(t, chaos.Env{
		Transport: func() (options.Transport, error) { return b.Transport(), nil },
		Faults: []chaos.Fault{
			chaos.BrokerRestart(func() error { b.Restart(); return nil }),
			chaos.AgentRestart(), chaos.HubRestart(),
		},
		Arm: func(seed uint64) {
			b.SetFaults(memory.Faults{Drop: 0.02, Duplicate: 0.02, Reorder: 0.05, MaxHold: 20 * time.Millisecond,
				Delay: 5 * time.Millisecond, Seed: seed})
		},
		Report: func() string { return fmt.Sprintf("broker faults: %+v", b.FaultStats()) },
	})
}

// mqttConfig is a client of a broker at addr that notices a dead
// connection fast and reconnects fast.
func mqttConfig(addr string) mqtt.Config {
	return mqtt.Config{
		BrokerHost:          addr,
		KeepAlive:           options.Duration(2 * time.Second),
		ReconnectMinBackoff: options.Duration(20 * time.Millisecond),
		ReconnectMaxBackoff: options.Duration(500 * time.Millisecond),
	}
}

// Over MQTT: the embedded broker behind a proxy that cuts, stalls and
// deafens connections; the broker restarts, and agents and the hub
// restart.
func TestChaosOverMQTT(t *testing.T) {
	b := mqtttest.NewBroker(t)
	chaosOverMQTT(t, b.Addr(), b.Restart)
}

// Over a real Mosquitto (a private one, with the queue settings of
// docs/mosquitto.md) behind a proxy that cuts, stalls and deafens
// connections; the
// broker restarts (losing every session: persistence is off), and agents
// and the hub restart. Skipped when Mosquitto is not installed, unless
// WORKWIRE_MQTT_BROKER asks for real-broker tests.
func TestChaosOverMosquitto(t *testing.T) {
	b := mosquitto.Start(t, func(port int) string { return mosquitto.Plain(port, mosquitto.QueueSettings()) })
	chaosOverMQTT(t, b.Addr(), func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return b.Restart(ctx)
	})
}

// chaosOverMQTT runs the chaos test over the MQTT broker at addr, behind a
// proxy, with restart as the broker restart fault.
func chaosOverMQTT(t *testing.T, addr string, restart func() error) {
	proxy, err := transporttest.NewProtocolProxy(transporttest.MQTT, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	cfg := mqttConfig(proxy.Addr())
	chaos.Run(t, chaos.Env{
		Transport: func() (options.Transport, error) { return mqtt.New(cfg, mqtt.WithLogger(logr.Discard())) },
		Faults: []chaos.Fault{
			chaos.BrokerRestart(restart),
			chaos.ProxyCut(proxy), chaos.ProxyStall(proxy), chaos.ProxyDeafen(proxy), chaos.AgentRestart(), chaos.HubRestart(),
		},
		Report: func() string {
			return fmt.Sprintf("proxy cuts %d, frames dropped deaf %d", proxy.Cuts(), proxy.Deafened())
		},
	})
}

// Over gRPC: the broker behind a proxy that cuts, stalls and deafens
// connections; the broker restarts, and agents and the hub restart. Its
// heartbeats, which probe the streams, come five times a second.
func TestChaosOverGRPC(t *testing.T) {
	srv := grpctest.NewServerWithConfig(t, server.Config{HeartbeatInterval: options.Duration(200 * time.Millisecond)})
	proxy, err := transporttest.NewProtocolProxy(transporttest.GRPC, srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	cfg := srv.Config()
	cfg.ServerAddress = proxy.Addr()
	chaos.Run(t, chaos.Env{
		Transport: func() (options.Transport, error) { return grpc.New(cfg, grpc.WithLogger(logr.Discard())) },
		Faults: []chaos.Fault{
			chaos.BrokerRestart(srv.Restart),
			chaos.ProxyCut(proxy), chaos.ProxyStall(proxy), chaos.ProxyDeafen(proxy), chaos.AgentRestart(), chaos.HubRestart(),
		},
		Report: func() string { return fmt.Sprintf("frames dropped deaf %d", proxy.Deafened()) },
	})
}

// Over Kafka: the cluster drops every connection or restarts empty (no
// records, no committed offsets), and agents and the hub restart.
func TestChaosOverKafka(t *testing.T) {
	b := kafkatest.NewBroker(t)
	cfg := kafka.Config{
		Brokers:             b.Addrs(),
		SessionTimeout:      options.Duration(2 * time.Second),
		HeartbeatInterval:   options.Duration(100 * time.Millisecond),
		RebalanceTimeout:    options.Duration(5 * time.Second),
		ReconnectMinBackoff: options.Duration(20 * time.Millisecond),
		ReconnectMaxBackoff: options.Duration(500 * time.Millisecond),
	}
	chaos.Run(t, chaos.Env{
		Transport: func() (options.Transport, error) { return kafka.New(cfg, kafka.WithLogger(logr.Discard())) },
		Faults: []chaos.Fault{
			chaos.BrokerFault("cluster restart", b.Restart),
			chaos.BrokerFault("connections dropped", func() error { b.DropConnections(); return nil }),
			chaos.AgentRestart(), chaos.HubRestart(),
		},
	})
}
