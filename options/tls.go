package options

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// TLSConfig is the TLS part of every transport's config. Setting any field
// turns TLS on: a CA alone means TLS with server verification and no client
// certificate. Client certificate and key files are re-read at each
// handshake, so rotated certificates take effect on the next reconnect.
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
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("caFile: %w", err))
		} else {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				errs = append(errs, fmt.Errorf("caFile %s: no PEM certificate found", c.CAFile))
			}
			cfg.RootCAs = pool
		}
	}
	switch {
	case c.CertFile != "" && c.KeyFile != "":
		if _, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile); err != nil {
			errs = append(errs, fmt.Errorf("client certificate: %w", err))
		}
		certFile, keyFile := c.CertFile, c.KeyFile
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cert, err := tls.LoadX509KeyPair(certFile, keyFile)
			if err != nil {
				return nil, fmt.Errorf("load client certificate: %w", err)
			}
			return &cert, nil
		}
	case c.CertFile != "" || c.KeyFile != "":
		errs = append(errs, errors.New("clientCertFile and clientKeyFile must be set together"))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("tls: %w", errors.Join(errs...))
	}
	return cfg, nil
}
