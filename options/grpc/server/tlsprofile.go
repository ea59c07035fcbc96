package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/workwire/sdk-go/options"
)

// TLSProfile is a TLS profile in OCM's form, as OCM's programs take it
// (--tls-min-version, --tls-cipher-suites) and read it from the
// ocm-tls-profile ConfigMap (keys minTLSVersion and cipherSuites): a
// minimum version named VersionTLS12 or VersionTLS13 (TLSv1.2, TLSv1.3), and
// TLS 1.2's cipher suites by their IANA names, comma-separated. An empty
// field leaves the setting as it is.
type TLSProfile struct {
	MinVersion   string
	CipherSuites string
}

// The ConfigMap's keys, as OCM names them.
const (
	tlsProfileMinVersion   = "minTLSVersion"
	tlsProfileCipherSuites = "cipherSuites"
)

// LoadTLSProfile reads OCM's TLS profile ConfigMap from path: a directory
// where it is mounted (a file per key, as a ConfigMap volume has it), or a
// file holding the ConfigMap's manifest, YAML or JSON. Keys other than
// minTLSVersion and cipherSuites are errors.
func LoadTLSProfile(path string) (TLSProfile, error) {
	info, err := os.Stat(path)
	if err != nil {
		return TLSProfile{}, fmt.Errorf("TLS profile: %w", err)
	}
	var data map[string]string
	if info.IsDir() {
		data, err = mountedKeys(path)
	} else {
		data, err = manifestData(path)
	}
	if err != nil {
		return TLSProfile{}, fmt.Errorf("TLS profile %s: %w", path, err)
	}
	var p TLSProfile
	var errs []error
	for k, v := range data {
		switch k {
		case tlsProfileMinVersion:
			p.MinVersion = strings.TrimSpace(v)
		case tlsProfileCipherSuites:
			p.CipherSuites = strings.TrimSpace(v)
		default:
			errs = append(errs, fmt.Errorf("key %q: want %s or %s", k, tlsProfileMinVersion, tlsProfileCipherSuites))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return TLSProfile{}, fmt.Errorf("TLS profile %s: %w", path, err)
	}
	return p, nil
}

// mountedKeys reads a ConfigMap volume: a file per key. The kubelet's own
// entries (..data, ..2026_…) begin with two dots.
func mountedKeys(dir string) (map[string]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	data := map[string]string{}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") || e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		data[e.Name()] = string(b)
	}
	return data, nil
}

// manifestData is the data of a ConfigMap's manifest.
func manifestData(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var cm struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   map[string]any    `json:"metadata"`
		Immutable  *bool             `json:"immutable"`
		Data       map[string]string `json:"data"`
	}
	if err := options.Unmarshal(b, &cm); err != nil {
		return nil, err
	}
	if cm.Kind != "ConfigMap" {
		return nil, fmt.Errorf("kind %q: want a ConfigMap", cm.Kind)
	}
	return cm.Data, nil
}

// WithProfile returns c with p's settings in place of its own, as OCM
// applies a profile: a minimum version and, below TLS 1.3 (whose suites are
// fixed), the cipher suites. A profile below TLS 1.2 is refused.
func (c TLSConfig) WithProfile(p TLSProfile) (TLSConfig, error) {
	if p.MinVersion != "" {
		v, err := ocmTLSVersion("minimum TLS version", p.MinVersion)
		if err != nil {
			return c, err
		}
		c.MinVersion = v
	}
	if p.CipherSuites != "" {
		c.CipherSuites = ocmCipherSuites(p.CipherSuites, "")
	}
	if c.MinVersion == "1.3" {
		c.CipherSuites = nil
	}
	return c, nil
}
