package grpc

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc/protocol"
)

// Defaults of Config.
const (
	// DefaultKeepAliveTime is how long a connection may be silent before
	// the client pings the server. The server (options/grpc/server) accepts
	// pings every 10s or slower.
	DefaultKeepAliveTime = 30 * time.Second
	// DefaultKeepAliveTimeout is how long the client waits for a ping's
	// answer before it closes the connection.
	DefaultKeepAliveTimeout = 10 * time.Second
	// DefaultDialTimeout bounds each connection attempt.
	DefaultDialTimeout = 10 * time.Second
	// DefaultReconnectMinBackoff and DefaultReconnectMaxBackoff bound the
	// backoff between resubscribe attempts.
	DefaultReconnectMinBackoff = 100 * time.Millisecond
	DefaultReconnectMaxBackoff = 30 * time.Second
	// DefaultMaxEventBytes is the largest publish request Send sends: gRPC's
	// default receive limit, which the server keeps by default.
	DefaultMaxEventBytes = 4 << 20
	// DefaultMaxReceiveBytes is the largest stream message the client
	// accepts; above the server's default publish limit, so that no event
	// the server accepted breaks a stream.
	DefaultMaxReceiveBytes = 16 << 20
)

// Config is the gRPC transport's configuration, as a config file holds it
// (see LoadConfig). The zero value of each optional field means its default.
type Config struct {
	// ServerAddress is the broker's address: host:port, or a gRPC target
	// such as "dns:///broker.example.com:8090". Required.
	ServerAddress string `json:"serverAddress"`
	// TLS turns TLS on when any field is set: a CA alone means TLS with
	// server verification; a client certificate and key add mutual TLS (the
	// broker can authenticate the client by the certificate's common name).
	// Certificate files are re-read at each handshake.
	TLS options.TLSConfig `json:"tls,omitempty"`
	// TokenFile holds a bearer token sent with every call (an
	// "authorization: Bearer" header), for example a projected Kubernetes
	// service account token. The file is re-read when it changes (checked at
	// most once a second), so rotated tokens take effect without a restart.
	// It requires TLS unless AllowTokenWithoutTLS is set. Default: none.
	TokenFile string `json:"tokenFile,omitempty"`
	// Token is a bearer token sent with every call, for a token that lives
	// in the config itself (OCM's gRPC files allow one). Prefer TokenFile,
	// which is re-read when it rotates; set one or the other. It requires
	// TLS as TokenFile does. Default: none.
	Token string `json:"token,omitempty"`
	// AllowTokenWithoutTLS sends the token over a plaintext connection, for
	// a sidecar (a service mesh) that encrypts the hop itself. Default: false.
	AllowTokenWithoutTLS bool `json:"allowTokenWithoutTLS,omitempty"`
	// KeepAliveTime is how long a connection may be silent before the
	// client pings the server; negative turns keep-alive pings off. gRPC
	// raises values under 10s to 10s, and the server (options/grpc/server)
	// disconnects clients that ping more often than its
	// MinClientPingInterval (10s by default). Default: DefaultKeepAliveTime.
	KeepAliveTime options.Duration `json:"keepAliveTime,omitempty"`
	// KeepAliveTimeout is how long the client waits for a ping's answer.
	// Default: DefaultKeepAliveTimeout.
	KeepAliveTimeout options.Duration `json:"keepAliveTimeout,omitempty"`
	// DialTimeout bounds each connection attempt. Default: DefaultDialTimeout.
	DialTimeout options.Duration `json:"dialTimeout,omitempty"`
	// ReconnectMinBackoff and ReconnectMaxBackoff bound the capped
	// exponential backoff between resubscribe attempts. Defaults:
	// DefaultReconnectMinBackoff, DefaultReconnectMaxBackoff.
	ReconnectMinBackoff options.Duration `json:"reconnectMinBackoff,omitempty"`
	ReconnectMaxBackoff options.Duration `json:"reconnectMaxBackoff,omitempty"`
	// HeartbeatTimeout is how long a subscription may hear nothing (no
	// event, no heartbeat) before the transport itself treats it as dead
	// and resubscribes, whatever uses it; it applies to any broker, OCM's
	// too, which sends heartbeats every 10s without announcing it (OCM's
	// files call it serverHealthinessTimeout). Unset (or negative), the
	// transport times nothing out: the clients' delivery check
	// (generic.WithDeliveryCheck) probes a quiet stream by the broker's
	// next heartbeat, on a broker that announces its interval (workwire's
	// does, in a response header), and has the transport resubscribe when
	// none comes; a merely idle stream is never torn down.
	HeartbeatTimeout options.Duration `json:"heartbeatTimeout,omitempty"`
	// MaxEventBytes rejects larger events (their encoded publish request)
	// at Send with options.ErrTooLarge, without sending them.
	// Default: DefaultMaxEventBytes.
	MaxEventBytes int `json:"maxEventBytes,omitempty"`
	// MaxReceiveBytes is the largest stream message accepted.
	// Default: DefaultMaxReceiveBytes.
	MaxReceiveBytes int `json:"maxReceiveBytes,omitempty"`
	// Compression, "gzip" (protocol.Gzip), compresses what the client
	// sends, and so what a grpc-go server streams back to it, which it
	// compresses as the subscription request was. The server must read
	// gzip: workwire's always does. Default: "", none; the client still
	// reads what a server compresses.
	Compression string `json:"compression,omitempty"`
}

// Validate reports every problem of c at once. It reads the TLS files c
// names (not the token file, which may appear later).
func (c Config) Validate() error {
	var errs []error
	if c.ServerAddress == "" {
		errs = append(errs, errors.New("serverAddress is required"))
	} else if !strings.Contains(c.ServerAddress, ":///") {
		if _, port, err := net.SplitHostPort(c.ServerAddress); err != nil || port == "" {
			errs = append(errs, fmt.Errorf("serverAddress %q: want host:port or a gRPC target such as dns:///host:port", c.ServerAddress))
		}
	}
	if c.TokenFile != "" && c.Token != "" {
		errs = append(errs, errors.New("set token or tokenFile, not both"))
	}
	if (c.TokenFile != "" || c.Token != "") && !c.TLS.IsEnabled() && !c.AllowTokenWithoutTLS {
		errs = append(errs, errors.New("a token (tokenFile or token) needs TLS (or allowTokenWithoutTLS behind a mesh that encrypts the hop)"))
	}
	if c.KeepAliveTimeout < 0 {
		errs = append(errs, fmt.Errorf("keepAliveTimeout %v: want 0 (default) or more", time.Duration(c.KeepAliveTimeout)))
	}
	if c.DialTimeout < 0 {
		errs = append(errs, fmt.Errorf("dialTimeout %v: want 0 (default) or more", time.Duration(c.DialTimeout)))
	}
	if c.ReconnectMinBackoff < 0 || c.ReconnectMaxBackoff < 0 {
		errs = append(errs, errors.New("reconnect backoffs must not be negative"))
	}
	if c.ReconnectMaxBackoff > 0 && c.ReconnectMinBackoff > c.ReconnectMaxBackoff {
		errs = append(errs, fmt.Errorf("reconnectMinBackoff %v exceeds reconnectMaxBackoff %v", time.Duration(c.ReconnectMinBackoff), time.Duration(c.ReconnectMaxBackoff)))
	}
	if c.MaxEventBytes < 0 {
		errs = append(errs, fmt.Errorf("maxEventBytes %d: want 0 (default) or more", c.MaxEventBytes))
	}
	if c.MaxReceiveBytes < 0 {
		errs = append(errs, fmt.Errorf("maxReceiveBytes %d: want 0 (default) or more", c.MaxReceiveBytes))
	}
	if err := protocol.CheckCompression("compression", c.Compression); err != nil {
		errs = append(errs, err)
	}
	if err := c.TLS.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("grpc config: %w", errors.Join(errs...))
	}
	return nil
}

// withDefaults returns c with every optional field that is zero set to
// its default (a negative KeepAliveTime, keep-alive off, stays). New
// applies it once; the transport reads c's fields as they are.
func (c Config) withDefaults() Config {
	options.Default(&c.KeepAliveTime, options.Duration(DefaultKeepAliveTime))
	options.Default(&c.KeepAliveTimeout, options.Duration(DefaultKeepAliveTimeout))
	options.Default(&c.DialTimeout, options.Duration(DefaultDialTimeout))
	options.Default(&c.ReconnectMinBackoff, options.Duration(DefaultReconnectMinBackoff))
	options.Default(&c.ReconnectMaxBackoff, options.Duration(DefaultReconnectMaxBackoff))
	options.Default(&c.MaxEventBytes, DefaultMaxEventBytes)
	options.Default(&c.MaxReceiveBytes, DefaultMaxReceiveBytes)
	return c
}

// serverHost is the host part of the address, for TLS server name checks.
func (c Config) serverHost() string {
	addr := c.ServerAddress
	if i := strings.Index(addr, ":///"); i >= 0 {
		addr = addr[i+4:]
	}
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}
