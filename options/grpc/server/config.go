package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/workwire/sdk-go/internal/tlsfiles"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc/protocol"
)

// Defaults of Config.
const (
	// DefaultHeartbeatInterval is how often the server sends a heartbeat
	// down every Subscribe stream (OCM's broker's interval): well under the
	// idle timeouts of common proxies and load balancers (30s and more).
	DefaultHeartbeatInterval = 10 * time.Second
	// DefaultQueueSize is how many events wait for one subscriber before it
	// counts as fallen behind and its stream is ended.
	DefaultQueueSize = 10000
	// DefaultQueueWait is how long a status waits for room in its source's
	// queue: far longer than a healthy source takes to drain a full queue.
	DefaultQueueWait = 30 * time.Second
	// DefaultQueueBytes is how many bytes of events (their encoded stream
	// messages) may wait for one subscriber before it counts as fallen
	// behind: 64 MiB, sixteen events of the largest default size, or the
	// full DefaultQueueSize of events averaging 6.7 KiB.
	DefaultQueueBytes = 64 << 20
	// DefaultMaxReceiveBytes is the largest publish request accepted (gRPC's
	// default).
	DefaultMaxReceiveBytes = 4 << 20
	// DefaultKeepAliveTime is how long a connection may be silent before the
	// server pings the client.
	DefaultKeepAliveTime = 30 * time.Second
	// DefaultKeepAliveTimeout is how long the server waits for a ping's answer.
	DefaultKeepAliveTimeout = 10 * time.Second
	// DefaultMinClientPingInterval is the shortest interval between client
	// pings the server tolerates; clients that ping more often are
	// disconnected (gRPC's "too many pings").
	DefaultMinClientPingInterval = 10 * time.Second
	// DefaultAuthCacheTTL is how long authentication and authorization
	// answers are cached.
	DefaultAuthCacheTTL = time.Minute
	// DefaultSourceID is the source ID the server speaks as for the data
	// types a Service backs.
	DefaultSourceID = "grpc-server"
	// DefaultSpecResendAfter is the least time the server waits for an
	// agent's status at a spec's version before it sends the spec again
	// (Config.SpecResendAfter).
	DefaultSpecResendAfter = 30 * time.Second // internal/ack's, as generic.DefaultSpecResendAfter is; a test keeps them equal
	// DefaultListenAddress is where ListenAndServe listens: every
	// interface, at the port OCM's hub serves gRPC on.
	DefaultListenAddress = ":8090"
)

// Config is the server's configuration, as a config file holds it (see
// LoadConfig). The zero value of each optional field means its default.
type Config struct {
	// ListenAddress is where ListenAndServe listens (Serve takes a listener
	// of the caller's). Default: DefaultListenAddress.
	ListenAddress string `json:"listenAddress,omitempty"`
	// TLS turns TLS on when CertFile and KeyFile are set; ClientCAFile adds
	// client certificate verification (mutual TLS).
	TLS TLSConfig `json:"tls,omitempty"`
	// HeartbeatInterval is how often the server sends a heartbeat event
	// down every Subscribe stream, whatever else it sends (OCM's agents count
	// only heartbeats toward their health check); it announces the interval
	// in the stream's response headers. Negative sends none. Default:
	// DefaultHeartbeatInterval.
	HeartbeatInterval options.Duration `json:"heartbeatInterval,omitempty"`
	// QueueSize bounds the events waiting for one subscriber. A subscriber
	// whose queue is full has fallen behind: its stream ends with
	// ResourceExhausted, and it resubscribes and resyncs, while the others
	// go on unaffected — except that what agents publish to sources (a
	// status, a spec resync request) first waits up to QueueWait for room
	// (see QueueWait). Default: DefaultQueueSize.
	QueueSize int `json:"queueSize,omitempty"`
	// QueueWait is how long a Publish of a status (or of a spec resync
	// request) waits for room in the full queue of its source (of each
	// source) before the source counts as fallen behind.
	// A whole fleet publishes to one source, which may well fall behind for
	// a moment; waiting slows its agents down to its pace, where dropping
	// it would make it resync the fleet. Other events never wait: a spec
	// goes to one agent, and a slow agent must not hold up the hub.
	// Default: DefaultQueueWait.
	QueueWait options.Duration `json:"queueWait,omitempty"`
	// QueueBytes bounds the bytes of the events waiting for one subscriber
	// (their encoded size), so that large events cannot exhaust memory
	// before QueueSize is reached: the subscriber overflowing either bound
	// is dropped alike — a status first waits up to QueueWait for room by
	// either, as many agents' statuses wait for one source at once, each
	// with its bytes counted. One event larger than QueueBytes still reaches a
	// subscriber whose queue is empty. The bound is per subscriber: the
	// server's worst case is the number of subscribers times QueueBytes.
	// Default: DefaultQueueBytes.
	QueueBytes int `json:"queueBytes,omitempty"`
	// MaxReceiveBytes is the largest publish request accepted; larger ones
	// fail with ResourceExhausted ("grpc: received message larger than max
	// (N vs. M)"), which gRPC answers before the server sees the request,
	// so its words cannot name this setting: workwire's client does, in the
	// options.ErrTooLarge its Send returns. Clients keep their
	// maxEventBytes at or below it. Default: DefaultMaxReceiveBytes.
	MaxReceiveBytes int `json:"maxReceiveBytes,omitempty"`
	// KeepAliveTime and KeepAliveTimeout are the server's pings of silent
	// connections. Defaults: DefaultKeepAliveTime, DefaultKeepAliveTimeout.
	KeepAliveTime    options.Duration `json:"keepAliveTime,omitempty"`
	KeepAliveTimeout options.Duration `json:"keepAliveTimeout,omitempty"`
	// MinClientPingInterval is the shortest interval between client pings
	// tolerated. Default: DefaultMinClientPingInterval.
	MinClientPingInterval options.Duration `json:"minClientPingInterval,omitempty"`
	// AuthCacheTTL is how long authentication and authorization answers are
	// cached: identities an Authenticator returned, and an Authorizer's
	// decisions, allowed or denied. Failed authentications and failures to
	// decide are not cached (an Authenticator may remember rejections
	// itself, as kubeauth.TokenReview does). Negative turns caching off.
	// Default: DefaultAuthCacheTTL.
	AuthCacheTTL options.Duration `json:"authCacheTTL,omitempty"`
	// SourceID is the source the server speaks as for the data types a
	// Service backs (see WithService): the events it sends agents come
	// from it, and agents' status for those types is addressed to it.
	// Default: DefaultSourceID.
	SourceID string `json:"sourceID,omitempty"`
	// OrphanGracePeriod is how long after Serve begins the server keeps
	// orphans — resources an agent's spec resync names as this server's
	// that its Service does not hold — instead of sending their
	// delete_request: a Service still loading its store would otherwise
	// have agents delete what it has not read yet. Default: 0.
	OrphanGracePeriod options.Duration `json:"orphanGracePeriod,omitempty"`
	// KeepOrphans never deletes orphans from agents: for Services that do
	// not hold every resource they once sent. Default: false.
	KeepOrphans bool `json:"keepOrphans,omitempty"`
	// SpecResendAfter is the least time the server waits for an agent's
	// status at the version of a spec it sent before it sends the spec
	// again, for the Services that are Acknowledgers: after that, or
	// twice the slowest acknowledgement the agent gave of late if that is
	// longer, doubling with each re-send up to ten minutes (or
	// SpecResendAfter, if longer), the oldest first, at most 500 per agent
	// at a time. An agent that has said
	// nothing for as long gets one spec at a time until it answers. What
	// an agent not connected to this server misses, its spec resync brings
	// it when it connects. Negative turns re-sending off. Default (0):
	// DefaultSpecResendAfter.
	SpecResendAfter options.Duration `json:"specResendAfter,omitempty"`
	// Compression, "gzip" (protocol.Gzip), compresses the events streamed
	// to every subscriber that accepts gzip (grpc-go clients with gzip
	// registered say so, as workwire's do), whether or not it compresses
	// what it sends; a subscriber that does not accept it gets them as
	// they are. Default: "", each stream as its subscription request was.
	// The server reads compressed requests whatever this says.
	Compression string `json:"compression,omitempty"`
}

// TLSConfig is the server side of TLS. The certificate, key and client CA
// files are read at each handshake (and parsed when they changed), so
// rotated files take effect without a restart.
type TLSConfig struct {
	// CertFile and KeyFile are the server's PEM certificate and key.
	CertFile string `json:"certFile,omitempty"`
	KeyFile  string `json:"keyFile,omitempty"`
	// ClientCAFile is a PEM bundle of CAs that verify client certificates.
	// Set, clients may authenticate by certificate (see
	// CertificateAuthenticator); a client without one may still use a token.
	ClientCAFile string `json:"clientCAFile,omitempty"`
	// RequireClientCert refuses connections without a verified client
	// certificate. Default: false.
	RequireClientCert bool `json:"requireClientCert,omitempty"`
	// MinVersion is the lowest TLS version accepted: "1.2" (default) or "1.3".
	MinVersion string `json:"minVersion,omitempty"`
	// MaxVersion is the highest TLS version offered: "1.2" or "1.3"
	// (default).
	MaxVersion string `json:"maxVersion,omitempty"`
	// CipherSuites are the TLS 1.2 cipher suites accepted, by their IANA
	// names (TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, say): a client
	// offering none of them is refused. Only suites Go counts as secure
	// (crypto/tls.CipherSuites) may be named; TLS 1.3's suites are not
	// configurable. Default: Go's.
	CipherSuites []string `json:"cipherSuites,omitempty"`
}

// Validate reports every problem of c at once. It reads the TLS files c
// names.
func (c Config) Validate() error {
	var errs []error
	if c.QueueSize < 0 {
		errs = append(errs, fmt.Errorf("queueSize %d: want 0 (default) or more", c.QueueSize))
	}
	if c.QueueWait < 0 {
		errs = append(errs, fmt.Errorf("queueWait %v: want 0 (default) or more", time.Duration(c.QueueWait)))
	}
	if c.QueueBytes < 0 {
		errs = append(errs, fmt.Errorf("queueBytes %d: want 0 (default) or more", c.QueueBytes))
	}
	if c.MaxReceiveBytes < 0 {
		errs = append(errs, fmt.Errorf("maxReceiveBytes %d: want 0 (default) or more", c.MaxReceiveBytes))
	}
	for name, d := range map[string]options.Duration{
		"keepAliveTime": c.KeepAliveTime, "keepAliveTimeout": c.KeepAliveTimeout, "minClientPingInterval": c.MinClientPingInterval,
		"orphanGracePeriod": c.OrphanGracePeriod,
	} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s %v: want 0 (default) or more", name, time.Duration(d)))
		}
	}
	if err := protocol.CheckCompression("compression", c.Compression); err != nil {
		errs = append(errs, err)
	}
	if _, err := c.TLS.Build(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("grpc server config: %w", errors.Join(errs...))
	}
	return nil
}

// IsEnabled reports whether c turns TLS on.
func (c TLSConfig) IsEnabled() bool {
	return c.CertFile != "" || c.KeyFile != "" || c.ClientCAFile != "" || c.RequireClientCert || c.MinVersion != "" ||
		c.MaxVersion != "" || len(c.CipherSuites) > 0
}

// tlsVersion parses a TLS version of a config: "1.2" or "1.3", or def for
// "".
func tlsVersion(key, v string, def uint16) (uint16, error) {
	switch v {
	case "":
		return def, nil
	case "1.2":
		return tls.VersionTLS12, nil
	case "1.3":
		return tls.VersionTLS13, nil
	}
	return 0, fmt.Errorf("%s %q: want 1.2 or 1.3", key, v)
}

// cipherSuites returns the IDs of the named suites: each must be one Go
// counts as secure.
func cipherSuites(names []string) ([]uint16, error) {
	if len(names) == 0 {
		return nil, nil
	}
	secure := map[string]uint16{}
	var known []string
	for _, s := range tls.CipherSuites() {
		secure[s.Name] = s.ID
		known = append(known, s.Name)
	}
	insecure := map[string]bool{}
	for _, s := range tls.InsecureCipherSuites() {
		insecure[s.Name] = true
	}
	var ids []uint16
	var errs []error
	for _, n := range names {
		switch id, ok := secure[n]; {
		case ok:
			ids = append(ids, id)
		case insecure[n]:
			errs = append(errs, fmt.Errorf("cipherSuites: %s is insecure; refused", n))
		default:
			errs = append(errs, fmt.Errorf("cipherSuites: %q is not a cipher suite; want one of %s", n, strings.Join(known, ", ")))
		}
	}
	return ids, errors.Join(errs...)
}

// Build returns the *tls.Config c describes, or nil when TLS is off.
func (c TLSConfig) Build() (*tls.Config, error) {
	if !c.IsEnabled() {
		return nil, nil
	}
	var errs []error
	cfg := &tls.Config{ClientAuth: tls.NoClientCert}
	var err error
	if cfg.MinVersion, err = tlsVersion("minVersion", c.MinVersion, tls.VersionTLS12); err != nil {
		errs = append(errs, err)
	}
	if cfg.MaxVersion, err = tlsVersion("maxVersion", c.MaxVersion, tls.VersionTLS13); err != nil {
		errs = append(errs, err)
	}
	if err == nil && cfg.MinVersion > cfg.MaxVersion {
		errs = append(errs, fmt.Errorf("minVersion %s is above maxVersion %s", c.MinVersion, c.MaxVersion))
	}
	if cfg.CipherSuites, err = cipherSuites(c.CipherSuites); err != nil {
		errs = append(errs, err)
	} else if len(c.CipherSuites) > 0 && cfg.MinVersion == tls.VersionTLS13 {
		errs = append(errs, errors.New("cipherSuites apply to TLS 1.2, which minVersion 1.3 refuses: remove one"))
	}
	if c.CertFile == "" || c.KeyFile == "" {
		errs = append(errs, errors.New("certFile and keyFile are required for TLS"))
	} else if pair, err := tlsfiles.NewKeyPair(c.CertFile, c.KeyFile); err != nil {
		errs = append(errs, fmt.Errorf("server certificate: %w", err))
	} else {
		cfg.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return pair.Get() }
	}
	if c.ClientCAFile != "" {
		clientCAs, err := tlsfiles.NewPool(c.ClientCAFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("clientCAFile: %w", err))
		} else {
			// A config per handshake, with the client CA bundle as its
			// file holds it then: a rotated CA takes effect at once.
			cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
				pool, err := clientCAs.Get()
				if err != nil {
					return nil, fmt.Errorf("clientCAFile: %w", err)
				}
				c := cfg.Clone()
				c.GetConfigForClient, c.ClientCAs = nil, pool
				return c, nil
			}
		}
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
		if c.RequireClientCert {
			cfg.ClientAuth = tls.RequireAndVerifyClientCert
		}
	} else if c.RequireClientCert {
		errs = append(errs, errors.New("requireClientCert needs clientCAFile"))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("tls: %w", errors.Join(errs...))
	}
	return cfg, nil
}

// withDefaults returns c with every optional field that is zero set to
// its default (a negative AuthCacheTTL, caching off, stays). New applies it
// once; the server reads c's fields as they are.
func (c Config) withDefaults() Config {
	options.Default(&c.SourceID, DefaultSourceID)
	options.Default(&c.ListenAddress, DefaultListenAddress)
	options.Default(&c.HeartbeatInterval, options.Duration(DefaultHeartbeatInterval))
	options.Default(&c.QueueSize, DefaultQueueSize)
	options.Default(&c.QueueBytes, DefaultQueueBytes)
	options.Default(&c.QueueWait, options.Duration(DefaultQueueWait))
	options.Default(&c.AuthCacheTTL, options.Duration(DefaultAuthCacheTTL))
	options.Default(&c.MaxReceiveBytes, DefaultMaxReceiveBytes)
	options.Default(&c.KeepAliveTime, options.Duration(DefaultKeepAliveTime))
	options.Default(&c.KeepAliveTimeout, options.Duration(DefaultKeepAliveTimeout))
	options.Default(&c.MinClientPingInterval, options.Duration(DefaultMinClientPingInterval))
	options.Default(&c.SpecResendAfter, options.Duration(DefaultSpecResendAfter))
	return c
}
