// Package testcerts makes a throwaway CA and certificates signed by it, for
// tests of TLS and mutual TLS. Nothing here is fit for production.
package testcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority that signs leaf certificates.
type CA struct {
	Cert    *x509.Certificate
	Key     *ecdsa.PrivateKey
	CertPEM []byte
	dir     string
	serial  int64
}

// Pair is a signed certificate and its key, in PEM and as files.
type Pair struct {
	CertPEM, KeyPEM   []byte
	CertFile, KeyFile string
}

// TLSCertificate returns the pair as a tls.Certificate.
func (p Pair) TLSCertificate(t testing.TB) tls.Certificate {
	c, err := tls.X509KeyPair(p.CertPEM, p.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// NewCA makes a CA whose files live in a temporary directory of t.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "workwire test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{Cert: cert, Key: key, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), dir: t.TempDir(), serial: 1}
	if err := os.WriteFile(ca.CAFile(), ca.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return ca
}

// CAFile is the path of the CA's PEM certificate.
func (ca *CA) CAFile() string { return filepath.Join(ca.dir, "ca.pem") }

// Pool returns a pool holding the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Server signs a server certificate for 127.0.0.1, ::1 and localhost.
func (ca *CA) Server(t testing.TB, name string) Pair {
	t.Helper()
	return ca.sign(t, name, x509.ExtKeyUsageServerAuth, []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, time.Now().Add(24*time.Hour))
}

// Client signs a client certificate whose common name is cn (the identity
// brokers and servers see).
func (ca *CA) Client(t testing.TB, cn string) Pair {
	t.Helper()
	return ca.sign(t, cn, x509.ExtKeyUsageClientAuth, nil, nil, time.Now().Add(24*time.Hour))
}

// ClientUntil signs a client certificate of cn valid until notAfter (from
// an hour ago), in files of their own: an expired one, or one about to
// expire.
func (ca *CA) ClientUntil(t testing.TB, cn string, notAfter time.Time) Pair {
	t.Helper()
	return ca.sign(t, cn, x509.ExtKeyUsageClientAuth, nil, nil, notAfter)
}

func (ca *CA) sign(t testing.TB, cn string, usage x509.ExtKeyUsage, dns []string, ips []net.IP, notAfter time.Time) Pair {
	ca.serial++
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		DNSNames:     dns,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	p := Pair{
		CertPEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:   pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		CertFile: filepath.Join(ca.dir, fmt.Sprintf("%s-%d.crt", cn, ca.serial)),
		KeyFile:  filepath.Join(ca.dir, fmt.Sprintf("%s-%d.key", cn, ca.serial)),
	}
	if err := os.WriteFile(p.CertFile, p.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.KeyFile, p.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// CertificateRequest returns a PEM certificate request of a fresh key for
// common name cn in groups orgs, as an agent sends one in a CSR.
func CertificateRequest(t testing.TB, cn string, orgs ...string) []byte {
	t.Helper()
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: cn, Organization: orgs},
	}, newKey(t))
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// KeyPEM returns the CA's private key in PEM.
func (ca *CA) KeyPEM(t testing.TB) []byte {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}
