package transporttest

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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
