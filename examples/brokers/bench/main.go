// Command bench is examples/bench, over NATS JetStream and Google Cloud
// Pub/Sub too:
//
//	go -C examples/brokers run ./bench -transport nats -works 10000 -clusters 100
//	go -C examples/brokers run ./bench -transport pubsub -works 10000 -clusters 100
package main

import (
	"github.com/workwire/sdk-go/examples/brokers"
	"github.com/workwire/sdk-go/examples/internal/bench"
)

func main() { bench.Main(brokers.Bench()...) }
