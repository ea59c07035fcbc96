package mqtttest_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/workwire/sdk-go/options/mqtt/mqtttest"
)

// A client that reconnects with its client ID while the broker is still
// cleaning up its old connection must get the messages of its new
// subscriptions. (mochi-mqtt, left alone, can let the old connection's
// cleanup delete the new client: connected, subscribed, and deaf.)
func TestReconnectWithTheSameClientIDIsNotDeaf(t *testing.T) {
	t.Parallel()
	b := mqtttest.NewBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	got := make(chan string, 16)
	connect := func(id string, onMessage func(string)) (*paho.Client, net.Conn) {
		t.Helper()
		conn, err := net.Dial("tcp", b.Addr())
		if err != nil {
			t.Fatal(err)
		}
		cfg := paho.ClientConfig{Conn: conn}
		if onMessage != nil {
			cfg.OnPublishReceived = []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
				onMessage(string(pr.Packet.Payload))
				return true, nil
			}}
		}
		cli := paho.NewClient(cfg)
		if _, err := cli.Connect(ctx, &paho.Connect{ClientID: id, CleanStart: true, KeepAlive: 30}); err != nil {
			t.Fatalf("connect %s: %v", id, err)
		}
		return cli, conn
	}
	pub, _ := connect("publisher", nil)
	defer func() {
		_ = pub.Disconnect(&paho.Disconnect{})
		<-pub.Done()
	}()

	const rounds = 200
	for i := range rounds {
		cli, conn := connect("agent", func(p string) { got <- p })
		if _, err := cli.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "spec", QoS: 1}}}); err != nil {
			t.Fatalf("round %d: subscribe: %v", i, err)
		}
		want := fmt.Sprint("round ", i)
		if _, err := pub.Publish(ctx, &paho.Publish{Topic: "spec", QoS: 1, Payload: []byte(want)}); err != nil {
			t.Fatalf("round %d: publish: %v", i, err)
		}
		select {
		case p := <-got:
			if p != want {
				t.Fatalf("round %d: got %q", i, p)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: a client that reconnected with its ID got nothing", i)
		}
		// The network fails under the client: the broker notices while
		// the client is already connecting again.
		_ = conn.Close()
		<-cli.Done()
	}
}
