package mqtt_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/options/mqtt/mqtttest"
	"github.com/workwire/sdk-go/options/transporttest"
)

// A transport is configured with a typed Config (or mqtt.LoadConfig from a
// YAML or JSON file) and handed to a generic client, which starts it. Here
// it is used directly, against the embedded broker.
func ExampleNew() {
	broker, err := mqtttest.Start()
	if err != nil {
		panic(err)
	}
	defer broker.Close()

	agent, err := mqtt.New(mqtt.Config{BrokerHost: broker.Addr(), Layout: "ocm"}, mqtt.WithLogger(logr.Discard()))
	if err != nil {
		panic(err)
	}
	received := transporttest.NewRecorder()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := agent.Start(ctx, options.AgentSubscriptions("cluster1", nil), received); err != nil {
		panic(err)
	}
	defer agent.Close(context.Background())

	hub, err := mqtt.New(mqtt.Config{BrokerHost: broker.Addr(), Layout: "ocm"}, mqtt.WithLogger(logr.Discard()))
	if err != nil {
		panic(err)
	}
	if err := hub.Start(ctx, nil, transporttest.NewRecorder()); err != nil {
		panic(err)
	}
	defer hub.Close(context.Background())

	evt := transporttest.NewEvent("e1", "spec.create_request")
	if err := hub.Send(ctx, options.Route{Role: options.RoleSpec, Source: "hub1", Cluster: "cluster1"}, evt); err != nil {
		panic(err)
	}
	for len(received.Deliveries()) == 0 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	d := received.Deliveries()[0]
	fmt.Println(d.Route.Role, d.Route.Source, d.Route.Cluster, d.Event.ID())
	// Output: spec hub1 cluster1 e1
}

// LoadConfig reads workwire's own keys and OCM's MQTT config files alike,
// strictly: a misspelt key is an error that says its line.
func ExampleLoadConfig() {
	dir, err := os.MkdirTemp("", "workwire-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	load := func(name, yaml string) (mqtt.Config, error) {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			panic(err)
		}
		return mqtt.LoadConfig(path)
	}

	cfg, err := load("mqtt.yaml", "brokerHost: mqtt.example.com:8883\nlayout: ocm\nkeepAlive: 30s\nqos: 1\n")
	if err != nil {
		panic(err)
	}
	fmt.Println(cfg.BrokerHost, cfg.Layout, time.Duration(cfg.KeepAlive), *cfg.QoS)

	// The file an OCM work agent is given: its QoS keys and topic filters.
	cfg, err = load("ocm.yaml", `brokerHost: mqtt.example.com:8883
pubQoS: 1
subQoS: 1
topics:
  sourceEvents: sources/hub1/clusters/cluster1/sourceevents
  agentEvents: sources/hub1/clusters/cluster1/agentevents
`)
	if err != nil {
		panic(err)
	}
	fmt.Println(cfg.BrokerHost, *cfg.QoS, cfg.Topics.Spec)

	_, err = load("typo.yaml", "brokerHost: mqtt.example.com:8883\nkeepalive: 30s\n")
	fmt.Println(err != nil && strings.Contains(err.Error(), `line 2: unknown field "keepalive"`))
	// Output:
	// mqtt.example.com:8883 ocm 30s 1
	// mqtt.example.com:8883 1 sources/{source}/clusters/{cluster}/sourceevents
	// true
}
