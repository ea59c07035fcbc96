// Package tlsfiles reads TLS certificates, keys and CA bundles from files at
// each handshake, so rotated files take effect on the next connection, and
// parses them only when their bytes changed: a handshake costs reading a
// few kilobytes, not parsing a private key.
package tlsfiles

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
)

// KeyPair is a certificate and key in two PEM files. It is goroutine-safe.
type KeyPair struct {
	certFile, keyFile string

	mu              sync.Mutex
	certPEM, keyPEM []byte
	cert            *tls.Certificate
}

// NewKeyPair returns the pair in certFile and keyFile, loaded once to
// report a problem now.
func NewKeyPair(certFile, keyFile string) (*KeyPair, error) {
	k := &KeyPair{certFile: certFile, keyFile: keyFile}
	if _, err := k.Get(); err != nil {
		return nil, err
	}
	return k, nil
}

// Get returns the pair as the files hold it now.
func (k *KeyPair) Get() (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(k.certFile)
	if err != nil {
		return nil, fmt.Errorf("certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(k.keyFile)
	if err != nil {
		return nil, fmt.Errorf("key: %w", err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cert != nil && bytes.Equal(certPEM, k.certPEM) && bytes.Equal(keyPEM, k.keyPEM) {
		return k.cert, nil
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		// Between the writes of a rotation the two files may not match:
		// keep serving the last good pair if there is one.
		if k.cert != nil {
			return k.cert, nil
		}
		return nil, fmt.Errorf("%s and %s: %w", k.certFile, k.keyFile, err)
	}
	k.certPEM, k.keyPEM, k.cert = certPEM, keyPEM, &cert
	return k.cert, nil
}

// Pool is a PEM bundle of CA certificates in a file. It is goroutine-safe.
type Pool struct {
	file string

	mu   sync.Mutex
	pem  []byte
	pool *x509.CertPool
}

// NewPool returns the bundle in file, loaded once to report a problem now.
func NewPool(file string) (*Pool, error) {
	p := &Pool{file: file}
	if _, err := p.Get(); err != nil {
		return nil, err
	}
	return p, nil
}

// Get returns the bundle as the file holds it now.
func (p *Pool) Get() (*x509.CertPool, error) {
	data, err := os.ReadFile(p.file)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pool != nil && bytes.Equal(data, p.pem) {
		return p.pool, nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		if p.pool != nil {
			return p.pool, nil // a rotation half written: keep the last good one
		}
		return nil, fmt.Errorf("%s: no PEM certificate found", p.file)
	}
	p.pem, p.pool = data, pool
	return pool, nil
}

// VerifyServer verifies a server's certificate chain against roots as
// crypto/tls does (for the name the client asked for), for a client
// config whose own verification is off so that roots can change.
func VerifyServer(cs tls.ConnectionState, roots *Pool) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tls: the server sent no certificate")
	}
	pool, err := roots.Get()
	if err != nil {
		return fmt.Errorf("tls: CA bundle: %w", err)
	}
	opts := x509.VerifyOptions{Roots: pool, DNSName: cs.ServerName, Intermediates: x509.NewCertPool()}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
		return fmt.Errorf("tls: verify the server's certificate: %w", err)
	}
	return nil
}
