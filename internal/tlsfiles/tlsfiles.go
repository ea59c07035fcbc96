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
	"slices"
	"sync"
)

// KeyPair is a certificate and key in two PEM files. It is goroutine-safe.
type KeyPair struct {
	files parsed[*tls.Certificate]
}

// NewKeyPair returns the pair in certFile and keyFile, loaded once to
// report a problem now.
func NewKeyPair(certFile, keyFile string) (*KeyPair, error) {
	k := &KeyPair{files: parsed[*tls.Certificate]{paths: []string{certFile, keyFile}, parse: func(data [][]byte) (*tls.Certificate, error) {
		cert, err := tls.X509KeyPair(data[0], data[1])
		if err != nil {
			return nil, fmt.Errorf("%s and %s: %w", certFile, keyFile, err)
		}
		return &cert, nil
	}}}
	if _, err := k.Get(); err != nil {
		return nil, err
	}
	return k, nil
}

// Get returns the pair as the files hold it now.
func (k *KeyPair) Get() (*tls.Certificate, error) { return k.files.get() }

// Pool is a PEM bundle of CA certificates in a file. It is goroutine-safe.
type Pool struct {
	files parsed[*x509.CertPool]
}

// NewPool returns the bundle in file, loaded once to report a problem now.
func NewPool(file string) (*Pool, error) {
	p := &Pool{files: parsed[*x509.CertPool]{paths: []string{file}, parse: func(data [][]byte) (*x509.CertPool, error) {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(data[0]) {
			return nil, fmt.Errorf("%s: no PEM certificate found", file)
		}
		return pool, nil
	}}}
	if _, err := p.Get(); err != nil {
		return nil, err
	}
	return p, nil
}

// Get returns the bundle as the file holds it now.
func (p *Pool) Get() (*x509.CertPool, error) { return p.files.get() }

// parsed is what parse made of the files at paths, parsed again only when
// their bytes changed. While their bytes do not parse — between the writes
// of a rotation — it keeps the last value that did.
type parsed[T any] struct {
	paths []string
	parse func(data [][]byte) (T, error)

	mu   sync.Mutex
	data [][]byte
	val  T
	ok   bool
}

func (p *parsed[T]) get() (T, error) {
	var zero T
	data := make([][]byte, len(p.paths))
	for i, path := range p.paths {
		b, err := os.ReadFile(path)
		if err != nil {
			return zero, err
		}
		data[i] = b
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ok && slices.EqualFunc(data, p.data, bytes.Equal) {
		return p.val, nil
	}
	v, err := p.parse(data)
	switch {
	case err == nil:
		p.data, p.val, p.ok = data, v, true
	case !p.ok:
		return zero, err
	}
	return p.val, nil
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
