package server

import (
	"crypto/x509"
	"errors"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"
)

// expiringCreds are TLS credentials whose connections end when the client
// certificate they were opened with expires: a stream never outlives the
// certificate that authenticated it, and an agent that rotated its
// certificate reconnects with the new one (a handshake with the old one
// fails). A connection without a client certificate (a token's) is left
// alone. Each failed handshake is told to failed.
type expiringCreds struct {
	credentials.TransportCredentials
	failed func(error)
}

func (c expiringCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		c.failed(err)
		return conn, info, err
	}
	ti, ok := info.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 {
		return conn, info, nil
	}
	var expiry time.Time
	for _, cert := range ti.State.VerifiedChains[0] {
		if expiry.IsZero() || cert.NotAfter.Before(expiry) {
			expiry = cert.NotAfter
		}
	}
	// Verified, but expired since (the handshake took that long).
	if !time.Now().Before(expiry) {
		_ = conn.Close()
		err := errors.New("the client certificate expired during the handshake")
		c.failed(err)
		return nil, nil, err
	}
	return newExpiringConn(conn, expiry), info, nil
}

func (c expiringCreds) Clone() credentials.TransportCredentials {
	return expiringCreds{c.TransportCredentials.Clone(), c.failed}
}

// expiringConn closes itself at its certificate's expiry.
type expiringConn struct {
	net.Conn
	timer *time.Timer
	once  sync.Once
}

func newExpiringConn(conn net.Conn, expiry time.Time) *expiringConn {
	c := &expiringConn{Conn: conn}
	// The timer closes the connection itself, not c: it may fire before
	// c.timer is set.
	c.timer = time.AfterFunc(time.Until(expiry), func() { _ = conn.Close() })
	return c
}

func (c *expiringConn) Close() error {
	c.once.Do(func() { c.timer.Stop() })
	return c.Conn.Close()
}

// handshakeFailure is the bounded reason label of a failed handshake.
func handshakeFailure(err error) string {
	var invalid x509.CertificateInvalidError
	var unknown x509.UnknownAuthorityError
	switch {
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return "expired"
	case errors.As(err, &unknown):
		return "unknown_authority"
	}
	return "other"
}
