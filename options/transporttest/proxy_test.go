package transporttest

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// sarama's consumer starts go-metrics' meter ticker, which never ends, the
// first time it fetches (the Kafka deafness test).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"))
}

// echo serves lines back until the test ends.
func echo(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	t.Cleanup(func() { l.Close(); <-done })
	return l.Addr().String()
}

func TestProxy(t *testing.T) {
	p, err := NewProxy(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	roundTrip := func(line string) (string, error) {
		if _, err := c.Write([]byte(line + "\n")); err != nil {
			return "", err
		}
		_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		return r.ReadString('\n')
	}
	if got, err := roundTrip("hello"); err != nil || got != "hello\n" {
		t.Fatalf("through the proxy: %q %v", got, err)
	}
	p.Stall()
	if _, err := roundTrip("stalled"); err == nil {
		t.Fatal("a stalled proxy forwarded")
	}
	p.Resume()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got, err := r.ReadString('\n'); err != nil || got != "stalled\n" {
		t.Fatalf("after Resume: %q %v", got, err)
	}
	p.Cut()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.ReadString('\n'); err == nil {
		t.Fatal("a cut connection still reads")
	}
	p.Refuse(true)
	c2, err := net.Dial("tcp", p.Addr())
	if err == nil {
		_ = c2.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c2.Read(make([]byte, 1)); err == nil {
			t.Fatal("a refusing proxy kept a connection")
		}
		c2.Close()
	}
	// Accepting again after a cut and a refusal: a new connection works.
	p.Refuse(false)
	c3, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	_ = c3.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c3.Write([]byte("again\n")); err != nil {
		t.Fatal(err)
	}
	if got, err := bufio.NewReader(c3).ReadString('\n'); err != nil || got != "again\n" {
		t.Fatalf("a new connection after Refuse(false): %q %v", got, err)
	}
	if p.Cuts() != 1 {
		t.Errorf("Cuts = %d", p.Cuts())
	}
}

// named serves lines back prefixed with name until the test ends.
func named(t *testing.T, name string) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(name + ":" + line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() { l.Close(); <-done })
	return l.Addr().String()
}

// In front of replicas, connections take turns among them; a killed one
// loses its connections and gets no new ones.
func TestProxyBalancesAndKills(t *testing.T) {
	a, b := named(t, "a"), named(t, "b")
	p, err := NewProxy(a, b)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	connect := func() (net.Conn, *bufio.Reader) {
		t.Helper()
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		return c, bufio.NewReader(c)
	}
	ask := func(c net.Conn, r *bufio.Reader) (string, error) {
		if _, err := c.Write([]byte("x\n")); err != nil {
			return "", err
		}
		return r.ReadString('\n')
	}
	var onA net.Conn
	var onAReader *bufio.Reader
	served := map[string]int{}
	for range 4 {
		c, r := connect()
		got, err := ask(c, r)
		if err != nil {
			t.Fatal(err)
		}
		served[got]++
		if got == "a:x\n" {
			onA, onAReader = c, r
		}
	}
	if served["a:x\n"] != 2 || served["b:x\n"] != 2 {
		t.Fatalf("served %v, want two connections each", served)
	}
	p.Kill(a)
	if _, err := ask(onA, onAReader); err == nil {
		t.Error("a connection to the killed replica still works")
	}
	for range 3 {
		c, r := connect()
		if got, err := ask(c, r); err != nil || got != "b:x\n" {
			t.Errorf("after the kill: %q, %v; want b", got, err)
		}
	}
}
