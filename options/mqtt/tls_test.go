package mqtt_test

import (
	"context"
	"crypto/tls"
	"errors"
	"testing"
	"time"

	"github.com/workwire/sdk-go/internal/testsupport/testcerts"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/options/mqtt/mqtttest"
	"github.com/workwire/sdk-go/options/transporttest"
)

func TestTLS(t *testing.T) {
	t.Parallel()
	ca := testcerts.NewCA(t)
	server := ca.Server(t, "broker")
	b := mqtttest.NewBroker(t, mqtttest.WithTLS(&tls.Config{Certificates: []tls.Certificate{server.TLSCertificate(t)}, MinVersion: tls.VersionTLS12}))

	// A CA alone means TLS, with no client certificate.
	tr := newTransport(t, mqtt.Config{BrokerHost: b.Addr(), TLS: options.TLSConfig{CAFile: ca.CAFile()}})
	startAndClose(t, tr, nil)

	// A plain-TCP client cannot talk to a TLS broker.
	plain := newTransport(t, mqtt.Config{BrokerHost: b.Addr()})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := plain.Start(ctx, nil, transporttest.NewRecorder()); err == nil {
		t.Error("plain TCP connected to a TLS broker")
	}
	closeNow(t, plain)

	// A CA that did not sign the broker's certificate fails verification.
	other := testcerts.NewCA(t)
	wrong := newTransport(t, mqtt.Config{BrokerHost: b.Addr(), TLS: options.TLSConfig{CAFile: other.CAFile()}})
	ctx2, cancel2 := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel2()
	if err := wrong.Start(ctx2, nil, transporttest.NewRecorder()); err == nil {
		t.Error("connected to a broker whose certificate the CA did not sign")
	}
	closeNow(t, wrong)
}

func TestMutualTLS(t *testing.T) {
	t.Parallel()
	ca := testcerts.NewCA(t)
	server := ca.Server(t, "broker")
	b := mqtttest.NewBroker(t, mqtttest.WithTLS(&tls.Config{
		Certificates: []tls.Certificate{server.TLSCertificate(t)},
		ClientCAs:    ca.Pool(),
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS12,
	}))
	client := ca.Client(t, "cluster1")
	tr := newTransport(t, mqtt.Config{BrokerHost: b.Addr(), TLS: options.TLSConfig{CAFile: ca.CAFile(), CertFile: client.CertFile, KeyFile: client.KeyFile}})
	startAndClose(t, tr, nil)

	noCert := newTransport(t, mqtt.Config{BrokerHost: b.Addr(), TLS: options.TLSConfig{CAFile: ca.CAFile()}})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := noCert.Start(ctx, nil, transporttest.NewRecorder()); err == nil {
		t.Error("connected without the client certificate the broker requires")
	}
	closeNow(t, noCert)
}

func startAndClose(t *testing.T, tr *mqtt.Transport, subs []options.Subscription) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.Start(ctx, subs, transporttest.NewRecorder()); err != nil {
		t.Fatal(err)
	}
	closeNow(t, tr)
}

func closeNow(t *testing.T, tr *mqtt.Transport) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.Close(ctx); err != nil && !errors.Is(err, options.ErrClosed) {
		t.Fatal(err)
	}
}
