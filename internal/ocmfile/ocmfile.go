// Package ocmfile reads the keys of the transport config files of OCM
// (open-cluster-management.io/sdk-go) into workwire's configs, so a user
// who moves a component to workwire keeps the file it has. Each transport's
// LoadConfig decodes a file into its Config together with the OCM keys it
// knows, then merges them: a setting given in both spellings is an error
// that names both keys.
package ocmfile

import (
	"errors"
	"fmt"
	"os"

	"github.com/workwire/sdk-go/options"
)

// Certs are the certificate keys OCM's MQTT and gRPC files have at the top
// level, where workwire's have them under tls.
type Certs struct {
	CAFile         string `json:"caFile,omitempty"`
	ClientCertFile string `json:"clientCertFile,omitempty"`
	ClientKeyFile  string `json:"clientKeyFile,omitempty"`
	// The PEM data OCM files may embed, base64-encoded: refused with a
	// clear error, since workwire reads certificates from files, which it
	// re-reads when they rotate.
	CAData         string `json:"caData,omitempty"`
	ClientCertData string `json:"clientCertData,omitempty"`
	ClientKeyData  string `json:"clientKeyData,omitempty"`
}

// MergeInto moves the certificate files into tls and returns an error for
// every setting given in both spellings and every embedded certificate.
func (c Certs) MergeInto(tls *options.TLSConfig) error {
	var errs []error
	Set(&errs, &tls.CAFile, "tls.caFile", c.CAFile, "caFile")
	Set(&errs, &tls.CertFile, "tls.clientCertFile", c.ClientCertFile, "clientCertFile")
	Set(&errs, &tls.KeyFile, "tls.clientKeyFile", c.ClientKeyFile, "clientKeyFile")
	for _, d := range []struct{ key, value, file string }{
		{"caData", c.CAData, "caFile"}, {"clientCertData", c.ClientCertData, "clientCertFile"}, {"clientKeyData", c.ClientKeyData, "clientKeyFile"},
	} {
		if d.value != "" {
			errs = append(errs, fmt.Errorf("%s: certificates embedded in the file are not supported; name the PEM file with %s, which is re-read when it rotates", d.key, d.file))
		}
	}
	return errors.Join(errs...)
}

// Set merges one setting that a file may give under workwire's key (its
// value already in *dst) or OCM's: the OCM value, if set, goes to *dst,
// unless both are set, which appends an error naming both keys to errs.
func Set[T comparable](errs *[]error, dst *T, ourKey string, ocm T, ocmKey string) {
	var zero T
	if ocm == zero {
		return
	}
	if *dst != zero {
		*errs = append(*errs, Both(ourKey, ocmKey))
		return
	}
	*dst = ocm
}

// Both is the error for one setting given under two keys.
func Both(ourKey, ocmKey string) error {
	return fmt.Errorf("%s and %s are one setting, in workwire's spelling and OCM's: keep one", ourKey, ocmKey)
}

// Load reads the config file at path and parses its bytes with parse.
func Load[C any](path string, parse func([]byte) (C, error)) (C, error) {
	var zero C
	data, err := os.ReadFile(path)
	if err != nil {
		return zero, fmt.Errorf("load config: %w", err)
	}
	c, err := parse(data)
	if err != nil {
		return zero, fmt.Errorf("load config %s: %w", path, err)
	}
	return c, nil
}
