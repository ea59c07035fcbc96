package grpc_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/go-logr/logr"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc"
	"github.com/workwire/sdk-go/options/grpc/server"
)

// inbox is an options.Receiver that hands deliveries to a channel.
type inbox chan *options.Delivery

func (in inbox) Deliver(d *options.Delivery) { in <- d; d.Done() }
func (in inbox) Malformed(error)             {}
func (in inbox) Connected()                  {}

// A source sends a spec to the agent of cluster1 through a broker. (In a
// test, grpctest.NewServer starts the broker in one line.)
func Example() {
	broker, err := server.New(server.Config{}, server.WithLogger(logr.Discard()))
	if err != nil {
		panic(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- broker.Serve(ctx, lis) }()
	defer func() { stop(); <-served }()

	cfg := grpc.Config{ServerAddress: lis.Addr().String()}
	agent, err := grpc.New(cfg, grpc.WithLogger(logr.Discard()))
	if err != nil {
		panic(err)
	}
	defer agent.Close(context.Background())
	received := make(inbox, 1)
	startCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := agent.Start(startCtx, options.AgentSubscriptions("cluster1", []string{"io.example.things.v1.things"}), received); err != nil {
		panic(err)
	}

	hub, err := grpc.New(cfg, grpc.WithLogger(logr.Discard()))
	if err != nil {
		panic(err)
	}
	defer hub.Close(context.Background())
	if err := hub.Start(startCtx, nil, make(inbox)); err != nil {
		panic(err)
	}
	evt := cloudevents.New()
	evt.SetID("1")
	evt.SetSource("hub")
	evt.SetType("io.example.things.v1.things.spec.create_request")
	evt.SetExtension("resourceid", "thing-1")
	evt.SetExtension("clustername", "cluster1") // the broker routes by it
	if err := hub.Send(startCtx, options.Route{Role: options.RoleSpec, Source: "hub", Cluster: "cluster1"}, &evt); err != nil {
		panic(err)
	}
	d := <-received
	fmt.Println(d.Route.Role, d.Route.Source, d.Route.Cluster, d.Event.Extensions()["resourceid"])
	// Output: spec hub cluster1 thing-1
}

func ExampleLoadConfig() {
	path := filepath.Join(os.TempDir(), "workwire-grpc-example.yaml")
	_ = os.WriteFile(path, []byte("serverAddress: broker.example.com:8090\nkeepAliveTime: 20s\nheartbeatTimeout: 45s\n"), 0o600)
	defer os.Remove(path)
	cfg, err := grpc.LoadConfig(path)
	if err != nil {
		panic(err)
	}
	fmt.Println(cfg.ServerAddress, time.Duration(cfg.KeepAliveTime), time.Duration(cfg.HeartbeatTimeout))
	// Output: broker.example.com:8090 20s 45s
}
