// Command quickstart runs the whole protocol in one process: an embedded
// broker (MQTT by default; -transport kafka or grpc for the others), one
// hub source and a few cluster agents. The hub sends
// ManifestWorks; each agent "applies" them and reports Applied and Available
// with a status-feedback value; the hub then updates some works and deletes
// others, and waits until every change has round-tripped.
//
//	go run ./examples/quickstart -clusters 3 -works 30
//
// It exits 0 only when every work was delivered, every status came back,
// every update was confirmed and every delete was acknowledged by its agent.
// Its source and cluster IDs are its own (a random suffix), so runs can
// share a broker (-broker); Ctrl-C stops it cleanly.
//
// Its code is examples/internal/quickstart, which the module
// examples/brokers runs over NATS JetStream and Pub/Sub too:
//
//	go -C examples/brokers run ./quickstart -transport nats
package main

import "github.com/workwire/sdk-go/examples/internal/quickstart"

func main() { quickstart.Main() }
