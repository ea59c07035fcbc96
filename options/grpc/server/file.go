package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/workwire/sdk-go/internal/ocmfile"
	"github.com/workwire/sdk-go/options"
)

// LoadConfig reads a Config from a YAML or JSON file and validates it.
// Unknown keys are errors. Besides its own keys it reads those of the
// server config file of OCM's hub (`server grpc --server-config`), so a hub
// moved to workwire keeps its file:
//
//	OCM key                      workwire key
//	server_bind_port             listenAddress (":<port>")
//	tls_cert_file, tls_key_file  tls.certFile, tls.keyFile
//	client_ca_file               tls.clientCAFile
//	tls_min_version, _max_       tls.minVersion, tls.maxVersion (see below)
//	cipher_suites                tls.cipherSuites (comma-separated IANA names)
//	max_receive_message_size     maxReceiveBytes
//	server_ping_interval, _timeout keepAliveTime, keepAliveTimeout
//	client_min_ping_interval     minClientPingInterval
//
// OCM's other keys (max_concurrent_streams, max_send_message_size,
// write_buffer_size, read_buffer_size, connection_timeout,
// max_connection_age, permit_ping_without_stream, cert_watch_interval) are
// accepted and have no effect: workwire's server re-reads its certificate
// files at each handshake and sizes its streams itself. OCM's durations are
// strings ("30s") or, as OCM reads them, integers of nanoseconds. Its TLS
// versions are names, as OCM v1.3 writes them (VersionTLS12 or TLSv1.2,
// VersionTLS13 or TLSv1.3), or numbers, as v1.2 did (771, 772); a version
// below TLS 1.2 is refused. As OCM's server does, it ignores cipher_suites
// when tls_min_version is TLS 1.3, whose suites are fixed. A file that
// gives one setting in both spellings is an error naming both keys.
func LoadConfig(path string) (Config, error) { return ocmfile.Load(path, parseConfig) }

// file is what a config file holds: a Config in workwire's keys, and OCM's.
type file struct {
	Config
	BindPort              ocmPort     `json:"server_bind_port,omitempty"`
	CertFile              string      `json:"tls_cert_file,omitempty"`
	KeyFile               string      `json:"tls_key_file,omitempty"`
	ClientCAFile          string      `json:"client_ca_file,omitempty"`
	MinVersion            ocmVersion  `json:"tls_min_version,omitempty"`
	MaxVersion            ocmVersion  `json:"tls_max_version,omitempty"`
	CipherSuites          string      `json:"cipher_suites,omitempty"`
	MaxReceiveMessageSize int         `json:"max_receive_message_size,omitempty"`
	ServerPingInterval    ocmDuration `json:"server_ping_interval,omitempty"`
	ServerPingTimeout     ocmDuration `json:"server_ping_timeout,omitempty"`
	ClientMinPingInterval ocmDuration `json:"client_min_ping_interval,omitempty"`
	ocmNoEffects
}

// ocmNoEffects are OCM's keys that workwire accepts and ignores.
type ocmNoEffects struct {
	MaxConcurrentStreams    json.Number `json:"max_concurrent_streams,omitempty"`
	MaxSendMessageSize      json.Number `json:"max_send_message_size,omitempty"`
	WriteBufferSize         json.Number `json:"write_buffer_size,omitempty"`
	ReadBufferSize          json.Number `json:"read_buffer_size,omitempty"`
	ConnectionTimeout       ocmDuration `json:"connection_timeout,omitempty"`
	MaxConnectionAge        ocmDuration `json:"max_connection_age,omitempty"`
	PermitPingWithoutStream bool        `json:"permit_ping_without_stream,omitempty"`
	CertWatchInterval       ocmDuration `json:"cert_watch_interval,omitempty"`
}

// ocmPort is OCM's server_bind_port: a string, or a number as YAML reads
// an unquoted one.
type ocmPort string

func (p *ocmPort) UnmarshalJSON(b []byte) error {
	s := strings.Trim(strings.TrimSpace(string(b)), `"`)
	if n, err := strconv.ParseUint(s, 10, 16); err != nil || n == 0 {
		return fmt.Errorf("server_bind_port %s: want a port, 1 to 65535", b)
	}
	*p = ocmPort(s)
	return nil
}

// ocmDuration is a duration as OCM's server reads it: a string such as
// "30s", or an integer of nanoseconds.
type ocmDuration options.Duration

func (d *ocmDuration) UnmarshalJSON(b []byte) error {
	s := strings.TrimSpace(string(b))
	if strings.HasPrefix(s, `"`) {
		var v options.Duration
		if err := v.UnmarshalJSON(b); err != nil {
			return err
		}
		*d = ocmDuration(v)
		return nil
	}
	ns, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("duration %s: want \"30s\" or an integer of nanoseconds, as OCM's server reads it", s)
	}
	*d = ocmDuration(time.Duration(ns))
	return nil
}

// ocmVersion is a TLS version as OCM's server config gives it: a name
// (v1.3) or a number (v1.2), kept as written for ocmTLSVersion.
type ocmVersion string

func (v *ocmVersion) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n json.Number
		if err := json.Unmarshal(b, &n); err != nil {
			return fmt.Errorf("TLS version %s: want a name (VersionTLS12) or a number (771)", b)
		}
		s = n.String()
	}
	*v = ocmVersion(s)
	return nil
}

// ocmTLSVersion is workwire's spelling of a TLS version as OCM writes it:
// its names (VersionTLS12, TLSv1.2; those of sdk-go's pkg/tls) or the
// numbers of crypto/tls (771), "" for none.
func ocmTLSVersion(key, v string) (string, error) {
	switch strings.TrimSpace(v) {
	case "":
		return "", nil
	case "VersionTLS12", "TLSv1.2", "771":
		return "1.2", nil
	case "VersionTLS13", "TLSv1.3", "772":
		return "1.3", nil
	case "VersionTLS10", "TLSv1.0", "769", "VersionTLS11", "TLSv1.1", "770":
		return "", fmt.Errorf("%s %s: below TLS 1.2, refused", key, v)
	}
	return "", fmt.Errorf("%s %q: want VersionTLS12 or VersionTLS13 (TLSv1.2, TLSv1.3; 771, 772)", key, v)
}

// ocmCipherSuites splits OCM's comma-separated cipher suites, none for a
// minimum of TLS 1.3 (whose suites are fixed), as OCM's server ignores
// them there.
func ocmCipherSuites(list, minVersion string) []string {
	if minVersion == "1.3" {
		return nil
	}
	var out []string
	for n := range strings.SplitSeq(list, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// parseConfig decodes and validates a config file's bytes.
func parseConfig(data []byte) (Config, error) {
	var f file
	if err := options.Unmarshal(data, &f); err != nil {
		return Config{}, err
	}
	c := f.Config
	var errs []error
	if f.BindPort != "" {
		ocmfile.Set(&errs, &c.ListenAddress, "listenAddress", ":"+string(f.BindPort), "server_bind_port")
	}
	ocmfile.Set(&errs, &c.TLS.CertFile, "tls.certFile", f.CertFile, "tls_cert_file")
	ocmfile.Set(&errs, &c.TLS.KeyFile, "tls.keyFile", f.KeyFile, "tls_key_file")
	ocmfile.Set(&errs, &c.TLS.ClientCAFile, "tls.clientCAFile", f.ClientCAFile, "client_ca_file")
	for _, v := range []struct {
		ourKey, ocmKey string
		dst            *string
		ocm            ocmVersion
	}{{"tls.minVersion", "tls_min_version", &c.TLS.MinVersion, f.MinVersion}, {"tls.maxVersion", "tls_max_version", &c.TLS.MaxVersion, f.MaxVersion}} {
		version, err := ocmTLSVersion(v.ocmKey, string(v.ocm))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ocmfile.Set(&errs, v.dst, v.ourKey, version, v.ocmKey)
	}
	if suites := ocmCipherSuites(f.CipherSuites, c.TLS.MinVersion); len(suites) > 0 {
		if len(c.TLS.CipherSuites) > 0 {
			errs = append(errs, ocmfile.Both("tls.cipherSuites", "cipher_suites"))
		} else {
			c.TLS.CipherSuites = suites
		}
	}
	ocmfile.Set(&errs, &c.MaxReceiveBytes, "maxReceiveBytes", f.MaxReceiveMessageSize, "max_receive_message_size")
	ocmfile.Set(&errs, &c.KeepAliveTime, "keepAliveTime", options.Duration(f.ServerPingInterval), "server_ping_interval")
	ocmfile.Set(&errs, &c.KeepAliveTimeout, "keepAliveTimeout", options.Duration(f.ServerPingTimeout), "server_ping_timeout")
	ocmfile.Set(&errs, &c.MinClientPingInterval, "minClientPingInterval", options.Duration(f.ClientMinPingInterval), "client_min_ping_interval")
	if err := errors.Join(errs...); err != nil {
		return Config{}, fmt.Errorf("grpc server config: %w", err)
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}
