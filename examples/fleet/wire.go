package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/eclipse/paho.golang/paho"
)

// wireMeter follows the bytes a Mosquitto received and sent, from its
// $SYS counters (published every second, see sys_interval), across
// restarts of the broker, which start them again at 0.
type wireMeter struct {
	mu      sync.Mutex
	last    map[string]int64     // counter → its value as last published
	base    map[string]int64     // counter → what it had before its restarts
	updated chan struct{}        // closed and replaced at each update
	at      map[string]time.Time // counter → when its last update arrived
}

var sysBytes = []string{"$SYS/broker/bytes/received", "$SYS/broker/bytes/sent"}

func newWireMeter() *wireMeter {
	return &wireMeter{last: map[string]int64{}, base: map[string]int64{}, at: map[string]time.Time{}, updated: make(chan struct{})}
}

// follow reads the counters of the Mosquitto at addr until ctx ends,
// connecting again whenever the connection ends.
func (m *wireMeter) follow(ctx context.Context, addr string) {
	for ctx.Err() == nil {
		m.read(ctx, addr)
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (m *wireMeter) read(ctx context.Context, addr string) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return
	}
	cli := paho.NewClient(paho.ClientConfig{Conn: conn, OnPublishReceived: []func(paho.PublishReceived) (bool, error){
		func(p paho.PublishReceived) (bool, error) {
			if n, err := strconv.ParseInt(string(p.Packet.Payload), 10, 64); err == nil {
				m.record(p.Packet.Topic, n)
			}
			return true, nil
		},
	}})
	if _, err := cli.Connect(ctx, &paho.Connect{ClientID: fmt.Sprintf("fleet-wire-%d", time.Now().UnixNano()), CleanStart: true, KeepAlive: 30}); err != nil {
		_ = conn.Close()
		return
	}
	var subs []paho.SubscribeOptions
	for _, t := range sysBytes {
		subs = append(subs, paho.SubscribeOptions{Topic: t, QoS: 0})
	}
	if _, err := cli.Subscribe(ctx, &paho.Subscribe{Subscriptions: subs}); err == nil {
		select {
		case <-ctx.Done():
		case <-cli.Done():
		}
	}
	_ = cli.Disconnect(&paho.Disconnect{})
	<-cli.Done()
}

func (m *wireMeter) record(topic string, n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n < m.last[topic] {
		m.base[topic] += m.last[topic] // the broker restarted
	}
	m.last[topic], m.at[topic] = n, time.Now()
	close(m.updated)
	m.updated = make(chan struct{})
}

// sysInterval is the Mosquitto's sys_interval: how often it publishes the
// counters.
const sysInterval = time.Second

// bytes returns the bytes received and sent so far, in all; settled, it
// first waits (at most three intervals) for an update that arrived a
// whole interval after the call, which counts what passed until then.
func (m *wireMeter) bytes(settled bool) int64 {
	if settled {
		after := time.Now().Add(sysInterval)
		deadline := time.After(3 * sysInterval)
	wait:
		for {
			m.mu.Lock()
			updated, fresh := m.updated, true
			for _, t := range sysBytes {
				fresh = fresh && !m.at[t].Before(after)
			}
			m.mu.Unlock()
			if fresh {
				break
			}
			select {
			case <-updated:
			case <-deadline:
				break wait
			}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var n int64
	for _, t := range sysBytes {
		n += m.base[t] + m.last[t]
	}
	return n
}
