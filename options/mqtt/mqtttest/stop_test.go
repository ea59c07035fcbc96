package mqtttest_test

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/workwire/sdk-go/options/mqtt/mqtttest"
)

// Stop returns while clients keep connecting and leaving. mochi's own
// Close, under this churn, deadlocked (its client list's read lock taken
// twice, a client arriving or leaving in between: mochi-mqtt/server#488)
// or panicked (a connection joining its WaitGroup while it waited), each
// within a few hundred rounds.
func TestStopWhileClientsComeAndGo(t *testing.T) {
	t.Parallel()
	for round := range 500 {
		b, err := mqtttest.Start()
		if err != nil {
			t.Fatal(err)
		}
		addr := b.Addr()
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for churner := range 8 {
			wg.Go(func() {
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					connectAndLeave(addr, fmt.Sprintf("churn-%d-%d-%d", round, churner, n))
				}
			})
		}
		time.Sleep(2 * time.Millisecond) // let the churn start
		stopped := make(chan error, 1)
		go func() { stopped <- b.Stop() }()
		select {
		case err := <-stopped:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("round %d: Stop still waits after 20s while clients come and go", round)
		}
		close(stop)
		wg.Wait()
	}
}

// connectAndLeave connects as a clean-start MQTT v5 client, waits for the
// CONNACK and closes the connection: the broker adds the client and then
// deletes it. Failures are expected once the broker stops.
func connectAndLeave(addr, clientID string) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	pk := packets.Packet{
		FixedHeader:     packets.FixedHeader{Type: packets.Connect},
		ProtocolVersion: 5,
		Connect: packets.ConnectParams{
			ProtocolName:     []byte("MQTT"),
			Clean:            true,
			ClientIdentifier: clientID,
			Keepalive:        30,
		},
	}
	var buf bytes.Buffer
	if err := pk.ConnectEncode(&buf); err != nil {
		return
	}
	if _, err := conn.Write(buf.Bytes()); err != nil {
		return
	}
	_, _ = bufio.NewReader(conn).ReadByte() // the CONNACK's first byte
}
