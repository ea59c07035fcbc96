// Package mosquitto runs a private Mosquitto broker for tests that need a
// real one they can configure (TLS, ACLs) or restart: a child process on a
// free 127.0.0.1 port with its own config file, stopped when the test ends.
// Recipe and ACL render the broker setup docs/mosquitto.md documents.
package mosquitto

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// EnvBroker names a running Mosquitto (host:port) to test against. When it
// is set, tests that need their own broker start one from the same
// installation and fail if they cannot.
const EnvBroker = "WORKWIRE_MQTT_BROKER"

// Binary returns the path of the mosquitto binary, or "" if none is installed.
func Binary() string {
	if p, err := exec.LookPath("mosquitto"); err == nil {
		return p
	}
	for _, p := range []string{"/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// Broker is a private Mosquitto process.
type Broker struct {
	t      testing.TB
	bin    string
	conf   string
	port   int
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// Plain returns the configuration of a broker without authentication on
// port of 127.0.0.1, followed by the extra lines given.
func Plain(port int, extra string) string {
	return fmt.Sprintf("listener %d 127.0.0.1\nallow_anonymous true\n%s", port, extra)
}

// Start runs Mosquitto with the configuration config returns for a free
// port (see Plain and Recipe.Config), to which it adds only what a private
// test broker needs: no persistence, logs to the test, and, as root, "user
// root". It skips t when Mosquitto is not installed and the environment
// does not ask for real-broker tests (EnvBroker), and fails it otherwise.
// The broker stops when t ends.
func Start(t testing.TB, config func(port int) string) *Broker {
	t.Helper()
	bin := Binary()
	if bin == "" {
		if os.Getenv(EnvBroker) != "" {
			t.Fatalf("%s is set but no mosquitto binary is installed", EnvBroker)
		}
		t.Skip("mosquitto is not installed")
	}
	port := freePort(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "mosquitto.conf")
	text := config(port) + "\n# For a private test broker:\npersistence false\nlog_dest stderr\nlog_type error\nlog_type warning\n"
	if os.Geteuid() == 0 {
		// Run as root (as CI does), Mosquitto would switch to its own user,
		// which cannot read the test's private temporary files.
		text += "user root\n"
	}
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	b := &Broker{t: t, bin: bin, conf: conf, port: port}
	if err := b.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	return b
}

// Addr returns the broker's host:port.
func (b *Broker) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(b.port)) }

func (b *Broker) start() error {
	cmd := exec.Command(b.bin, "-c", b.conf)
	cmd.Stderr = &testWriter{t: b.t}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start mosquitto: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	b.mu.Lock()
	b.cmd, b.exited = cmd, exited
	b.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("mosquitto exited at start (config %s)", b.conf)
		default:
		}
		if c, err := net.DialTimeout("tcp", b.Addr(), 100*time.Millisecond); err == nil {
			c.Close()
			// Another process may hold the port (it was free when chosen,
			// or while the broker was down): then Mosquitto exits as it
			// fails to bind, at once.
			select {
			case <-exited:
				return fmt.Errorf("mosquitto exited at start: is port %d taken? (config %s)", b.port, b.conf)
			case <-time.After(100 * time.Millisecond):
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.Stop()
	return errors.New("mosquitto did not listen within 10s")
}

// Stop terminates the broker and waits for it. It is idempotent.
func (b *Broker) Stop() {
	b.mu.Lock()
	cmd, exited := b.cmd, b.exited
	b.cmd = nil
	b.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// Restart stops the broker and starts it again on the same port: every
// client loses its connection and, with persistence off, its session. It
// retries until ctx ends (the port may linger for a moment).
func (b *Broker) Restart(ctx context.Context) error {
	b.Stop()
	var err error
	for ctx.Err() == nil {
		if err = b.start(); err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.Join(err, ctx.Err())
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// testWriter sends Mosquitto's errors to the test log while the test runs.
type testWriter struct {
	t  testing.TB
	mu sync.Mutex
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	defer func() { _ = recover() }() // the test may have ended; logging then panics
	w.t.Logf("mosquitto: %s", p)
	return len(p), nil
}
