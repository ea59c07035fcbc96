// Command quickstart is examples/quickstart, over NATS JetStream and Google
// Cloud Pub/Sub too:
//
//	go -C examples/brokers run ./quickstart -transport nats
//	go -C examples/brokers run ./quickstart -transport pubsub
package main

import (
	"github.com/workwire/sdk-go/examples/brokers"
	"github.com/workwire/sdk-go/examples/internal/quickstart"
)

func main() { quickstart.Main(brokers.Quickstart()...) }
