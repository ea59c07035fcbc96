package mqtt

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/workwire/sdk-go/options"
)

// Defaults of Config.
const (
	DefaultKeepAlive           = 60 * time.Second
	DefaultQoS                 = 1
	DefaultDialTimeout         = 10 * time.Second
	DefaultReconnectMinBackoff = 100 * time.Millisecond
	DefaultReconnectMaxBackoff = 30 * time.Second
	DefaultSessionExpiry       = time.Hour
)

// Config is the MQTT transport's configuration, as a config file holds it
// (see LoadConfig). The zero value of each optional field means its default.
type Config struct {
	// BrokerHost is the broker's address, host:port. Required.
	BrokerHost string `json:"brokerHost"`
	// Username and Password authenticate to the broker. Optional.
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	// ClientID is the MQTT client ID. It must be unique per connection: two
	// connections with one ID take each other's session over in a loop.
	// Default: "workwire-" and random characters.
	ClientID string `json:"clientID,omitempty"`
	// KeepAlive is the MQTT keep-alive. Default: DefaultKeepAlive.
	KeepAlive options.Duration `json:"keepAlive,omitempty"`
	// QoS is the quality of service of publishes and subscriptions: 0, 1 or 2.
	// Default: 1 (at least once).
	QoS *int `json:"qos,omitempty"`
	// PersistentSession asks the broker to keep the session (subscriptions
	// and queued QoS 1 messages) for SessionExpiry after a disconnect, instead
	// of a clean start. Default: false (clean start; resync heals the gap).
	PersistentSession bool `json:"persistentSession,omitempty"`
	// SessionExpiry is how long the broker keeps a persistent session.
	// Default: DefaultSessionExpiry, when PersistentSession is set.
	SessionExpiry options.Duration `json:"sessionExpiry,omitempty"`
	// TLS turns TLS on when any field is set; a CA alone means TLS with no
	// client certificate.
	TLS options.TLSConfig `json:"tls,omitempty"`
	// Layout names the topic preset: "workwire" (default; "seed" is accepted too) or "ocm".
	Layout string `json:"layout,omitempty"`
	// Topics replaces the preset with custom templates.
	Topics *options.Layout `json:"topics,omitempty"`
	// SharedGroup, if set, subscribes to specs and statuses through
	// "$share/<group>/" so replicas of one source (same source ID, same
	// group) share them instead of each receiving all of them. Resync
	// requests still reach every replica: one too large for the broker's
	// packet limit comes in batches that must all reach the replica
	// answering it. Default: off.
	SharedGroup string `json:"sharedGroup,omitempty"`
	// Will is a last-will message the broker publishes if the connection
	// drops without a clean disconnect. Default: none.
	Will *Will `json:"will,omitempty"`
	// DialTimeout bounds each TCP (and TLS) connect. Default: DefaultDialTimeout.
	DialTimeout options.Duration `json:"dialTimeout,omitempty"`
	// ReconnectMinBackoff and ReconnectMaxBackoff bound the capped
	// exponential backoff between reconnect attempts. Defaults:
	// DefaultReconnectMinBackoff, DefaultReconnectMaxBackoff.
	ReconnectMinBackoff options.Duration `json:"reconnectMinBackoff,omitempty"`
	ReconnectMaxBackoff options.Duration `json:"reconnectMaxBackoff,omitempty"`
	// ReceiveMaximum, if set, is how many QoS 1 and 2 messages the broker
	// may have in flight to this client before it waits for
	// acknowledgements. paho keeps a buffer of this many pointers per
	// connection (512 KiB at MQTT's default of 65,535), so a process with
	// many connections may set it lower. Brokers' flow control varies:
	// mochi-mqtt caps it at its own inflight limit and holds what is beyond
	// until the client's next packet, which can be a keep-alive away, so
	// set it only with a broker that handles it well. Default: 0, not sent
	// (MQTT's 65,535).
	ReceiveMaximum int `json:"receiveMaximum,omitempty"`
	// MaxEventBytes rejects larger events at Send with options.ErrTooLarge.
	// Default: 0, only the broker's own maximum packet size (if it announces
	// one) applies.
	MaxEventBytes int `json:"maxEventBytes,omitempty"`
	// ContentMode is how Send lays an event out in a PUBLISH packet, in the
	// terms of the CloudEvents MQTT binding: ContentModeBinary (default)
	// or ContentModeStructured. Receivers read either mode whatever this
	// says, and so do OCM's peers.
	ContentMode string `json:"contentMode,omitempty"`
}

// The content modes of the CloudEvents MQTT binding.
const (
	// ContentModeBinary carries each attribute and extension as an MQTT
	// user property and the data as the payload.
	ContentModeBinary = "binary"
	// ContentModeStructured carries the whole event as one JSON payload
	// (application/cloudevents+json). A receiver allocates less for it:
	// paho reads every user property into buffers of its own, of at least
	// 512 bytes each, so a binary event of ten attributes costs ten times
	// that before the event is decoded.
	ContentModeStructured = "structured"
)

// Will is an MQTT last-will message.
type Will struct {
	Topic   string `json:"topic"`
	Payload string `json:"payload,omitempty"`
	QoS     int    `json:"qos,omitempty"`
	Retain  bool   `json:"retain,omitempty"`
}

// qos returns the configured QoS or the default.
func (c Config) qos() byte {
	if c.QoS == nil {
		return DefaultQoS
	}
	return byte(*c.QoS)
}

// layout returns the topic layout the config selects.
func (c Config) layout() (options.Layout, error) {
	if c.Topics != nil {
		return *c.Topics, nil
	}
	return options.LayoutByName(c.Layout)
}

// withDefaults returns c with every optional field that is zero set to
// its default. New applies it once; the transport reads c's fields as
// they are.
func (c Config) withDefaults() Config {
	options.Default(&c.KeepAlive, options.Duration(DefaultKeepAlive))
	options.Default(&c.SessionExpiry, options.Duration(DefaultSessionExpiry))
	options.Default(&c.DialTimeout, options.Duration(DefaultDialTimeout))
	options.Default(&c.ReconnectMinBackoff, options.Duration(DefaultReconnectMinBackoff))
	options.Default(&c.ReconnectMaxBackoff, options.Duration(DefaultReconnectMaxBackoff))
	return c
}

// Validate reports every problem of c at once. It reads the TLS files c
// names.
func (c Config) Validate() error {
	var errs []error
	if c.BrokerHost == "" {
		errs = append(errs, errors.New("brokerHost is required"))
	} else if _, hostPort, ok := strings.Cut(c.BrokerHost, "://"); ok {
		errs = append(errs, fmt.Errorf("brokerHost %q: want host:port without a scheme, such as %q (the tls settings turn TLS on)", c.BrokerHost, hostPort))
	} else if _, port, err := net.SplitHostPort(c.BrokerHost); err != nil || port == "" {
		errs = append(errs, fmt.Errorf("brokerHost %q: want host:port", c.BrokerHost))
	}
	if c.QoS != nil && (*c.QoS < 0 || *c.QoS > 2) {
		errs = append(errs, fmt.Errorf("qos %d: want 0, 1 or 2", *c.QoS))
	}
	if c.KeepAlive < 0 || time.Duration(c.KeepAlive) > 65535*time.Second {
		errs = append(errs, fmt.Errorf("keepAlive %v: want 0 to 65535s", time.Duration(c.KeepAlive)))
	}
	if c.Topics != nil && c.Layout != "" {
		errs = append(errs, errors.New("set layout or topics, not both"))
	}
	if l, err := c.layout(); err != nil {
		errs = append(errs, err)
	} else if err := l.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.SharedGroup != "" && strings.ContainsAny(c.SharedGroup, "/+#") {
		errs = append(errs, fmt.Errorf("sharedGroup %q must not contain '/', '+' or '#'", c.SharedGroup))
	}
	if c.Will != nil {
		if c.Will.Topic == "" || strings.ContainsAny(c.Will.Topic, "+#") {
			errs = append(errs, fmt.Errorf("will topic %q: want a topic without wildcards", c.Will.Topic))
		}
		if c.Will.QoS < 0 || c.Will.QoS > 2 {
			errs = append(errs, fmt.Errorf("will qos %d: want 0, 1 or 2", c.Will.QoS))
		}
	}
	for _, d := range []struct {
		name string
		v    options.Duration
	}{
		{"dialTimeout", c.DialTimeout}, {"sessionExpiry", c.SessionExpiry},
		{"reconnectMinBackoff", c.ReconnectMinBackoff}, {"reconnectMaxBackoff", c.ReconnectMaxBackoff},
	} {
		if d.v < 0 { // in this order in the error, every time
			errs = append(errs, fmt.Errorf("%s %v: want 0 (default) or more", d.name, time.Duration(d.v)))
		}
	}
	if c.ReconnectMaxBackoff > 0 && c.ReconnectMinBackoff > c.ReconnectMaxBackoff {
		errs = append(errs, fmt.Errorf("reconnectMinBackoff %v exceeds reconnectMaxBackoff %v", time.Duration(c.ReconnectMinBackoff), time.Duration(c.ReconnectMaxBackoff)))
	}
	if c.ReceiveMaximum < 0 || c.ReceiveMaximum > 65535 {
		errs = append(errs, fmt.Errorf("receiveMaximum %d: want 1 to 65535 (0 for the default)", c.ReceiveMaximum))
	}
	switch c.ContentMode {
	case "", ContentModeBinary, ContentModeStructured:
	default:
		errs = append(errs, fmt.Errorf("contentMode %q: want %q (default) or %q", c.ContentMode, ContentModeBinary, ContentModeStructured))
	}
	if c.MaxEventBytes < 0 {
		errs = append(errs, fmt.Errorf("maxEventBytes %d: want 0 (broker's limit) or more", c.MaxEventBytes))
	}
	if err := c.TLS.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("mqtt config: %w", errors.Join(errs...))
	}
	return nil
}
