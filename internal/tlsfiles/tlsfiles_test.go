package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"

	"github.com/workwire/sdk-go/internal/testsupport/testcerts"
)

func write(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// A handshake reads the files; it parses them only when they changed.
func TestKeyPairParsesOnlyWhatChanged(t *testing.T) {
	ca := testcerts.NewCA(t)
	first, second := ca.Server(t, "a"), ca.Server(t, "b")
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	write(t, certFile, first.CertPEM)
	write(t, keyFile, first.KeyPEM)
	k, err := NewKeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	one, _ := k.Get()
	if two, _ := k.Get(); two != one {
		t.Error("unchanged files were parsed again")
	}
	// Half a rotation (a new certificate, the old key) keeps the last good
	// pair; the whole rotation gives the new one.
	write(t, certFile, second.CertPEM)
	if got, err := k.Get(); err != nil || got != one {
		t.Errorf("mid-rotation: %v, same pair %v", err, got == one)
	}
	write(t, keyFile, second.KeyPEM)
	got, err := k.Get()
	if err != nil || got == one || got.Leaf == nil || got.Leaf.Subject.CommonName != "b" {
		t.Errorf("after the rotation: %v, %v", got, err)
	}
	if _, err := NewKeyPair(certFile, filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing key file is not an error")
	}
}

func TestPoolParsesOnlyWhatChanged(t *testing.T) {
	a, b := testcerts.NewCA(t), testcerts.NewCA(t)
	file := filepath.Join(t.TempDir(), "ca.pem")
	write(t, file, a.CertPEM)
	p, err := NewPool(file)
	if err != nil {
		t.Fatal(err)
	}
	one, _ := p.Get()
	if two, _ := p.Get(); two != one {
		t.Error("an unchanged bundle was parsed again")
	}
	write(t, file, []byte("not yet"))
	if got, _ := p.Get(); got != one {
		t.Error("a half-written bundle replaced the last good one")
	}
	write(t, file, b.CertPEM)
	if got, _ := p.Get(); got == one || !got.Equal(b.Pool()) {
		t.Error("the rotated bundle is not the pool")
	}
	write(t, file, []byte("garbage"))
	if _, err := NewPool(file); err == nil {
		t.Error("a bundle without certificates is not an error")
	}
}

func TestVerifyServer(t *testing.T) {
	a, b := testcerts.NewCA(t), testcerts.NewCA(t)
	server := a.Server(t, "broker")
	leaf := server.TLSCertificate(t)
	file := filepath.Join(t.TempDir(), "ca.pem")
	write(t, file, a.CertPEM)
	roots, err := NewPool(file)
	if err != nil {
		t.Fatal(err)
	}
	cs := tls.ConnectionState{ServerName: "localhost", PeerCertificates: []*x509.Certificate{leaf.Leaf}}
	if err := VerifyServer(cs, roots); err != nil {
		t.Errorf("a certificate of the CA: %v", err)
	}
	if err := VerifyServer(tls.ConnectionState{ServerName: "elsewhere.example", PeerCertificates: cs.PeerCertificates}, roots); err == nil {
		t.Error("a certificate for another name verified")
	}
	write(t, file, b.CertPEM)
	if err := VerifyServer(cs, roots); err == nil {
		t.Error("after the CA rotated, the old CA's certificate verified")
	}
	if err := VerifyServer(tls.ConnectionState{ServerName: "localhost"}, roots); err == nil {
		t.Error("no certificate verified")
	}
}
