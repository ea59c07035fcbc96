package options

import (
	"crypto/tls"
	"errors"
	"fmt"

	"github.com/workwire/sdk-go/internal/tlsfiles"
)

// TLSConfig is the TLS part of every transport's config. Setting any field
// turns TLS on: a CA alone means TLS with server verification and no client
// certificate. The CA bundle and the client certificate and key files are
// read at each handshake (and parsed when they changed), so rotated files
// take effect on the next reconnect.
type TLSConfig struct {
	// CAFile is a PEM bundle of CAs that verify the server. Empty: the system pool.
	CAFile string `json:"caFile,omitempty"`
	// CertFile and KeyFile are the PEM client certificate and key for mutual
	// TLS. Set both or neither.
	CertFile string `json:"clientCertFile,omitempty"`
	KeyFile  string `json:"clientKeyFile,omitempty"`
	// ServerName overrides the name the server certificate is verified
	// against. Empty: the host part of the broker address.
	ServerName string `json:"serverName,omitempty"`
	// MinVersion is the lowest TLS version accepted: "1.2" (default) or "1.3".
	MinVersion string `json:"minVersion,omitempty"`
	// InsecureSkipVerify turns off server certificate verification. For tests
	// only; it is never the default.
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
	// Enabled turns TLS on with the system CAs and no other setting.
	Enabled bool `json:"enabled,omitempty"`
}

// IsEnabled reports whether any field asks for TLS.
func (c TLSConfig) IsEnabled() bool {
	return c.Enabled || c.CAFile != "" || c.CertFile != "" || c.KeyFile != "" ||
		c.ServerName != "" || c.MinVersion != "" || c.InsecureSkipVerify
}

// Validate reports every problem at once. It reads the files it names.
func (c TLSConfig) Validate() error {
	_, err := c.Build("")
	return err
}

// Build returns the *tls.Config c describes, or nil when TLS is off.
// defaultServerName is used when ServerName is empty (pass the broker host).
func (c TLSConfig) Build(defaultServerName string) (*tls.Config, error) {
	if !c.IsEnabled() {
		return nil, nil
	}
	var errs []error
	cfg := &tls.Config{
		ServerName:         c.ServerName,
		InsecureSkipVerify: c.InsecureSkipVerify, //nolint:gosec // opt-in, documented as test-only
	}
	if cfg.ServerName == "" {
		cfg.ServerName = defaultServerName
	}
	switch c.MinVersion {
	case "", "1.2":
		cfg.MinVersion = tls.VersionTLS12
	case "1.3":
		cfg.MinVersion = tls.VersionTLS13
	default:
		errs = append(errs, fmt.Errorf("minVersion %q: want 1.2 or 1.3", c.MinVersion))
	}
	if c.CAFile != "" {
		roots, err := tlsfiles.NewPool(c.CAFile)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("caFile: %w", err))
		case !c.InsecureSkipVerify:
			// crypto/tls reads RootCAs once; verifying here reads the
			// bundle at each handshake, so a rotated CA takes effect on
			// the next connection. The verification is crypto/tls's own.
			cfg.InsecureSkipVerify = true //nolint:gosec // verified by VerifyConnection
			cfg.VerifyConnection = func(cs tls.ConnectionState) error { return tlsfiles.VerifyServer(cs, roots) }
		}
	}
	switch {
	case c.CertFile != "" && c.KeyFile != "":
		pair, err := tlsfiles.NewKeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("client certificate: %w", err))
			break
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return pair.Get() }
	case c.CertFile != "" || c.KeyFile != "":
		errs = append(errs, errors.New("clientCertFile and clientKeyFile must be set together"))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("tls: %w", errors.Join(errs...))
	}
	return cfg, nil
}
