package work_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/workwire/sdk-go/options/kafka"
	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/work"
)

func TestNewClientHolderRefusesWhatCannotConnect(t *testing.T) {
	tests := []struct {
		name   string
		config any
		want   string
	}{
		{"nothing", nil, "no config: <nil> is nil"},
		{"a nil rest config", (*rest.Config)(nil), "no config: *rest.Config is nil"},
		{"a nil transport config", (*mqtt.Config)(nil), "no config: *mqtt.Config is nil"},
		{"a nil transport func", work.TransportFunc(nil), "no config: options.TransportFunc is nil"},
		{"a config by value", mqtt.Config{BrokerHost: "127.0.0.1:1883"}, "config mqtt.Config: want a *rest.Config or an options.TransportConfig"},
		{"something else", "127.0.0.1:1883", "config string: want a *rest.Config or an options.TransportConfig"},
		{"an invalid transport config", &kafka.Config{}, "brokers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := work.NewClientHolderBuilder(tt.config).WithSourceID("hub1").NewClientHolder()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewClientHolder() = %v, %v; want an error containing %q", h, err, tt.want)
			}
		})
	}
}

func TestNewClientHolderWantsOneRole(t *testing.T) {
	cfg := &mqtt.Config{BrokerHost: "127.0.0.1:1883"}
	for _, b := range []*work.ClientHolderBuilder{
		work.NewClientHolderBuilder(cfg),
		work.NewClientHolderBuilder(cfg).WithSourceID("hub1").WithClusterName("cluster1"),
	} {
		if _, err := b.NewClientHolder(); err == nil || !strings.Contains(err.Error(), "set exactly one of WithSourceID") {
			t.Errorf("NewClientHolder() error = %v, want one about the role", err)
		}
	}
}

// A hub sends a cluster the works in the cluster's namespace, so an agent
// whose cluster name no namespace can have is refused, not left waiting.
func TestNewClientHolderRefusesAClusterNameNoHubCanSendTo(t *testing.T) {
	cfg := &mqtt.Config{BrokerHost: "127.0.0.1:1883"}
	for _, name := range []string{"Cluster1", "cluster_1", "cluster.1", strings.Repeat("c", 64)} {
		_, err := work.NewClientHolderBuilder(cfg).WithClusterName(name).NewClientHolder()
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("cluster name %q: it is the namespace of the cluster's objects on the hub: ", name)) {
			t.Errorf("WithClusterName(%q): %v, want an error naming it", name, err)
		}
	}
	h, err := work.NewClientHolderBuilder(cfg).WithClusterName("cluster-1").NewClientHolder()
	if err != nil {
		t.Fatalf("WithClusterName(\"cluster-1\"): %v", err)
	}
	_ = h.Close(context.Background())
}

func TestNewClientHolderRefusesAMaxWorkBytesOfNone(t *testing.T) {
	cfg := &mqtt.Config{BrokerHost: "127.0.0.1:1883"}
	for _, n := range []int{0, -1} {
		_, err := work.NewClientHolderBuilder(cfg).WithSourceID("hub1").WithMaxWorkBytes(n).NewClientHolder()
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("max work bytes %d: want more than 0", n)) {
			t.Errorf("WithMaxWorkBytes(%d): %v, want an error naming it", n, err)
		}
	}
}
