package kafka_test

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/workwire/sdk-go/internal/testsupport/testcerts"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/kafka"
	"github.com/workwire/sdk-go/options/kafka/kafkatest"
	"github.com/workwire/sdk-go/options/transporttest"
)

// roundTrip starts an agent and a source with cfg and sends a spec between
// them.
func roundTrip(t *testing.T, cfg kafka.Config) {
	t.Helper()
	r := start(t, newTransport(t, cfg), options.AgentSubscriptions("c1", nil))
	hub := newTransport(t, cfg)
	start(t, hub, nil)
	send(t, hub, options.Route{Role: options.RoleSpec, Source: "hub", Cluster: "c1"}, "secure")
	r.Wait(t, "the spec", wait, func() bool { return has(r, "secure") })
}

// startFails checks that Start fails, and within d when d > 0 although its
// context would allow longer (a failure retrying cannot fix).
func startFails(t *testing.T, cfg kafka.Config, d time.Duration, why string) {
	t.Helper()
	tr := newTransport(t, cfg)
	defer closeNow(t, tr)
	timeout := 2 * time.Second
	if d > 0 {
		timeout = wait
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	begin := time.Now()
	err := tr.Start(ctx, nil, transporttest.NewRecorder())
	if err == nil {
		t.Fatalf("Start succeeded: %s", why)
	}
	if d > 0 && time.Since(begin) > d {
		t.Errorf("Start took %v to fail (%v): retrying cannot fix it", time.Since(begin), err)
	}
	t.Logf("%s: %v", why, err)
}

func TestTLS(t *testing.T) {
	t.Parallel()
	ca := testcerts.NewCA(t)
	server := ca.Server(t, "broker")
	b := kafkatest.NewBroker(t, kafkatest.WithTLS(&tls.Config{Certificates: []tls.Certificate{server.TLSCertificate(t)}, MinVersion: tls.VersionTLS12}))

	// A CA alone means TLS, with no client certificate; each broker is
	// verified against its own address.
	roundTrip(t, kafka.Config{Brokers: b.Addrs(), TLS: options.TLSConfig{CAFile: ca.CAFile()}})

	startFails(t, kafka.Config{Brokers: b.Addrs()}, 0, "plain TCP to a TLS broker")
	other := testcerts.NewCA(t)
	startFails(t, kafka.Config{Brokers: b.Addrs(), TLS: options.TLSConfig{CAFile: other.CAFile()}}, 5*time.Second,
		"a CA that did not sign the broker's certificate")
}

func TestMutualTLS(t *testing.T) {
	t.Parallel()
	ca := testcerts.NewCA(t)
	server := ca.Server(t, "broker")
	b := kafkatest.NewBroker(t, kafkatest.WithTLS(&tls.Config{
		Certificates: []tls.Certificate{server.TLSCertificate(t)},
		ClientCAs:    ca.Pool(),
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS12,
	}))
	client := ca.Client(t, "cluster1")
	roundTrip(t, kafka.Config{Brokers: b.Addrs(), TLS: options.TLSConfig{CAFile: ca.CAFile(), CertFile: client.CertFile, KeyFile: client.KeyFile}})

	// Certificates held in memory instead of files.
	tr := newTransport(t, kafka.Config{Brokers: b.Addrs()}, kafka.WithTLSConfig(&tls.Config{
		RootCAs: ca.Pool(), Certificates: []tls.Certificate{client.TLSCertificate(t)}, MinVersion: tls.VersionTLS12,
	}))
	start(t, tr, nil)

	startFails(t, kafka.Config{Brokers: b.Addrs(), TLS: options.TLSConfig{CAFile: ca.CAFile()}}, 0,
		"no client certificate where the broker requires one")
}

func TestSASL(t *testing.T) {
	t.Parallel()
	for _, mech := range []string{kafka.SASLPlain, kafka.SASLScramSHA256, kafka.SASLScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			t.Parallel()
			b := kafkatest.NewBroker(t, kafkatest.WithSASL(mech, "hub", "s3cret,=pass"))
			roundTrip(t, kafka.Config{Brokers: b.Addrs(), SASL: &kafka.SASLConfig{Mechanism: mech, Username: "hub", Password: "s3cret,=pass"}})
			// kfake drops the connection of a client that fails to
			// authenticate, where Kafka answers SASL_AUTHENTICATION_FAILED
			// (which Start reports at once, see TestPermanentErrors): here
			// Start retries until its context ends.
			startFails(t, kafka.Config{Brokers: b.Addrs(), SASL: &kafka.SASLConfig{Mechanism: mech, Username: "hub", Password: "wrong"}},
				0, "a wrong password")
		})
	}
}

// The password file is read for every connection: a transport started with
// it works, a wrong password written over it fails the next connection, and
// the right one written back lets the one after that through, with no
// restart (a rotated Kubernetes Secret).
func TestSASLPasswordFile(t *testing.T) {
	t.Parallel()
	for _, mech := range []string{kafka.SASLPlain, kafka.SASLScramSHA256, kafka.SASLScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			t.Parallel()
			b := kafkatest.NewBroker(t, kafkatest.WithSASL(mech, "hub", "s3cret,=pass"))
			file := filepath.Join(t.TempDir(), "password")
			write := func(p string) {
				t.Helper()
				// A new file renamed over the old, as the kubelet swaps a
				// Secret volume's contents.
				tmp := file + ".new"
				if err := os.WriteFile(tmp, []byte(p), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(tmp, file); err != nil {
					t.Fatal(err)
				}
			}
			write("wrong\n")
			cfg := kafka.Config{Brokers: b.Addrs(), SASL: &kafka.SASLConfig{Mechanism: mech, Username: "hub", PasswordFile: file}}
			startFails(t, cfg, 0, "a wrong password in the file")

			write("s3cret,=pass\n")
			roundTrip(t, cfg)
			hub := newTransport(t, cfg)
			start(t, hub, nil)
			route := options.Route{Role: options.RoleSpec, Source: "hub", Cluster: "c1"}
			send(t, hub, route, "before")

			write("wrong")
			b.DropConnections()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := hub.Send(ctx, route, transporttest.NewEvent("rejected", "spec.create_request")); err == nil {
				t.Fatal("Send succeeded on a new connection with the wrong password in the file")
			}

			write("s3cret,=pass")
			deadline := time.Now().Add(wait)
			for {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				err := hub.Send(ctx, route, transporttest.NewEvent("after", "spec.create_request"))
				cancel()
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("Send with the right password back in the file: %v", err)
				}
			}
		})
	}
}

// With a password file, the transport does TLS and SASL/PLAIN itself.
func TestSASLPlainPasswordFileOverTLS(t *testing.T) {
	t.Parallel()
	ca := testcerts.NewCA(t)
	server := ca.Server(t, "broker")
	b := kafkatest.NewBroker(t,
		kafkatest.WithTLS(&tls.Config{Certificates: []tls.Certificate{server.TLSCertificate(t)}, MinVersion: tls.VersionTLS12}),
		kafkatest.WithSASL(kafka.SASLPlain, "hub", "s3cret"))
	file := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(file, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sasl := &kafka.SASLConfig{Mechanism: kafka.SASLPlain, Username: "hub", PasswordFile: file}
	roundTrip(t, kafka.Config{Brokers: b.Addrs(), TLS: options.TLSConfig{CAFile: ca.CAFile()}, SASL: sasl})

	other := testcerts.NewCA(t)
	startFails(t, kafka.Config{Brokers: b.Addrs(), TLS: options.TLSConfig{CAFile: other.CAFile()}, SASL: sasl}, 5*time.Second,
		"a CA that did not sign the broker's certificate")
	startFails(t, kafka.Config{Brokers: b.Addrs(), SASL: sasl}, 0, "plain TCP to a TLS broker")
}
