package nats

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/workwire/sdk-go/options"
)

// Defaults of Config.
const (
	DefaultStream              = "WORKWIRE"
	DefaultSubjectPrefix       = "workwire"
	DefaultConsumerPrefix      = "workwire"
	DefaultMaxAge              = 24 * time.Hour
	DefaultAckWait             = time.Minute
	DefaultMaxAckPending       = 10_000
	DefaultMaxConsumers        = 100_000
	DefaultPullHeartbeat       = 2 * time.Second
	DefaultConnectTimeout      = 10 * time.Second
	DefaultReconnectMinBackoff = 100 * time.Millisecond
	DefaultReconnectMaxBackoff = 30 * time.Second
)

// Config is the NATS transport's configuration, as a config file holds it
// (see LoadConfig). The zero value of each optional field means its default.
type Config struct {
	// URL is the server, nats://host:4222 (tls://host:4222 for TLS), or
	// several of one cluster separated by commas. Required.
	URL string `json:"url"`
	// TLS turns TLS on when any field is set; a CA alone means TLS with no
	// client certificate. Setting CertFile and KeyFile gives mutual TLS.
	TLS options.TLSConfig `json:"tls,omitempty"`
	// CredsFile is a NATS credentials file (a user JWT and its NKey seed),
	// as NATS's decentralized authentication issues them. Default: none.
	CredsFile string `json:"credsFile,omitempty"`
	// Username and Password authenticate with a user of the server's
	// authorization block. PasswordFile, read at each connect, replaces
	// Password. Default: none.
	Username     string `json:"username,omitempty"`
	Password     string `json:"password,omitempty"`
	PasswordFile string `json:"passwordFile,omitempty"`
	// TokenFile holds an authentication token, read at each connect.
	// Default: none.
	TokenFile string `json:"tokenFile,omitempty"`
	// Stream is the JetStream stream that keeps specs and statuses. A
	// transport creates it when it is missing (with MaxAge and Replicas)
	// and otherwise uses it as it is. Default: DefaultStream.
	Stream string `json:"stream,omitempty"`
	// SubjectPrefix starts every subject: "<prefix>.sources.<source>.clusters.<cluster>.spec"
	// and so on (see the package documentation). Default: DefaultSubjectPrefix.
	SubjectPrefix string `json:"subjectPrefix,omitempty"`
	// ConsumerPrefix starts the names of the durable consumers a transport
	// derives from its subscriptions: "<prefix>_spec_<cluster>" for an
	// agent, "<prefix>_status_<source ID>" for a source, so a restarted
	// client resumes where it stopped and replicas of one source share its
	// statuses. Default: DefaultConsumerPrefix.
	ConsumerPrefix string `json:"consumerPrefix,omitempty"`
	// MaxAge is how long a stream the transport creates keeps an event:
	// how long a client may be away and still resume. Default: DefaultMaxAge.
	MaxAge options.Duration `json:"maxAge,omitempty"`
	// Replicas is how many servers of a cluster keep a stream the transport
	// creates. Default: 1.
	Replicas int `json:"replicas,omitempty"`
	// MaxConsumers is how many consumers a stream the transport creates
	// allows: a fleet has one per agent and one per source. A stream that
	// sets none gets its server's default, which nats-server 2.15 made
	// 1,000. Default: DefaultMaxConsumers.
	MaxConsumers int `json:"maxConsumers,omitempty"`
	// AckWait is how long the server waits for a delivered event to be
	// handled (Delivery.Done) before it delivers it again. Default:
	// DefaultAckWait.
	AckWait options.Duration `json:"ackWait,omitempty"`
	// MaxAckPending is how many delivered events of one consumer may wait
	// for Delivery.Done at once; the server sends no more until some are.
	// Default: DefaultMaxAckPending.
	MaxAckPending int `json:"maxAckPending,omitempty"`
	// PullHeartbeat is how often the server tells a consumer's client that
	// its pull is alive; after twice that without a word the client pulls
	// again. A consumer whose leader was killed or hung, or that had no
	// leader yet when its client first pulled, tells the client nothing, so
	// this bounds how long such a client hears nothing: about twice
	// PullHeartbeat. Default: DefaultPullHeartbeat; between 500ms and 15s.
	PullHeartbeat options.Duration `json:"pullHeartbeat,omitempty"`
	// MaxEventBytes rejects larger events at Send with options.ErrTooLarge.
	// Default: the server's max_payload, which it announces when a
	// client connects (1 MiB unless configured).
	MaxEventBytes int `json:"maxEventBytes,omitempty"`
	// ConnectTimeout bounds each connect. Default: DefaultConnectTimeout.
	ConnectTimeout options.Duration `json:"connectTimeout,omitempty"`
	// ReconnectMinBackoff and ReconnectMaxBackoff bound the capped
	// exponential backoff between attempts to connect. Defaults:
	// DefaultReconnectMinBackoff, DefaultReconnectMaxBackoff.
	ReconnectMinBackoff options.Duration `json:"reconnectMinBackoff,omitempty"`
	ReconnectMaxBackoff options.Duration `json:"reconnectMaxBackoff,omitempty"`
}

// LoadConfig reads a Config from a YAML or JSON file; unknown keys are
// errors.
func LoadConfig(path string) (Config, error) { return options.LoadConfig[Config](path) }

// Validate reports every problem of c at once. It checks that the files c
// names exist.
func (c Config) Validate() error {
	var errs []error
	if strings.TrimSpace(c.URL) == "" {
		errs = append(errs, errors.New("url: a server URL such as nats://127.0.0.1:4222 is required"))
	}
	for u := range strings.SplitSeq(c.URL, ",") {
		if u = strings.TrimSpace(u); u == "" {
			continue
		}
		p, err := url.Parse(u)
		if err != nil || p.Host == "" || !validScheme(p.Scheme) {
			errs = append(errs, fmt.Errorf("url %q: want nats://host:port or tls://host:port", u))
		}
	}
	if err := c.TLS.Validate(); err != nil {
		errs = append(errs, err)
	}
	auths := 0
	for _, a := range []string{c.CredsFile, c.Username, c.TokenFile} {
		if a != "" {
			auths++
		}
	}
	if auths > 1 {
		errs = append(errs, errors.New("credsFile, username and tokenFile are three ways to authenticate: set one"))
	}
	if c.Password != "" && c.PasswordFile != "" {
		errs = append(errs, errors.New("set password or passwordFile, not both"))
	}
	if (c.Password != "" || c.PasswordFile != "") && c.Username == "" {
		errs = append(errs, errors.New("a password needs a username"))
	}
	for _, f := range []struct{ key, path string }{{"credsFile", c.CredsFile}, {"passwordFile", c.PasswordFile}, {"tokenFile", c.TokenFile}} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.key, err))
		}
	}
	for _, n := range []struct{ key, value string }{{"stream", c.Stream}, {"consumerPrefix", c.ConsumerPrefix}} {
		if n.value != "" && !validName(n.value) {
			errs = append(errs, fmt.Errorf("%s %q: want letters, digits, '-' and '_' only", n.key, n.value))
		}
	}
	if c.SubjectPrefix != "" {
		for tok := range strings.SplitSeq(c.SubjectPrefix, ".") {
			if tok == "" || !validToken(tok) {
				errs = append(errs, fmt.Errorf("subjectPrefix %q: want dot-separated tokens without spaces, '*' or '>'", c.SubjectPrefix))
				break
			}
		}
	}
	for _, n := range []struct {
		key   string
		value int
	}{{"replicas", c.Replicas}, {"maxConsumers", c.MaxConsumers}, {"maxAckPending", c.MaxAckPending}, {"maxEventBytes", c.MaxEventBytes}} {
		if n.value < 0 {
			errs = append(errs, fmt.Errorf("%s %d: must not be negative", n.key, n.value))
		}
	}
	for _, d := range []struct {
		key   string
		value options.Duration
	}{{"maxAge", c.MaxAge}, {"ackWait", c.AckWait}, {"connectTimeout", c.ConnectTimeout},
		{"reconnectMinBackoff", c.ReconnectMinBackoff}, {"reconnectMaxBackoff", c.ReconnectMaxBackoff}} {
		if d.value < 0 {
			errs = append(errs, fmt.Errorf("%s %s: must not be negative", d.key, time.Duration(d.value)))
		}
	}
	if hb := time.Duration(c.PullHeartbeat); hb != 0 && (hb < minPullHeartbeat || hb > maxPullHeartbeat) {
		errs = append(errs, fmt.Errorf("pullHeartbeat %s: want it between %s and %s", hb, minPullHeartbeat, maxPullHeartbeat))
	}
	if c.ReconnectMaxBackoff > 0 && c.ReconnectMinBackoff > c.ReconnectMaxBackoff {
		errs = append(errs, errors.New("reconnectMinBackoff is above reconnectMaxBackoff"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("nats config: %w", errors.Join(errs...))
	}
	return nil
}

// withDefaults returns c with every unset optional field at its default.
func (c Config) withDefaults() Config {
	options.Default(&c.Stream, DefaultStream)
	options.Default(&c.SubjectPrefix, DefaultSubjectPrefix)
	options.Default(&c.ConsumerPrefix, DefaultConsumerPrefix)
	options.Default(&c.MaxAge, options.Duration(DefaultMaxAge))
	options.Default(&c.Replicas, 1)
	options.Default(&c.MaxConsumers, DefaultMaxConsumers)
	options.Default(&c.AckWait, options.Duration(DefaultAckWait))
	options.Default(&c.MaxAckPending, DefaultMaxAckPending)
	options.Default(&c.PullHeartbeat, options.Duration(DefaultPullHeartbeat))
	options.Default(&c.ConnectTimeout, options.Duration(DefaultConnectTimeout))
	options.Default(&c.ReconnectMinBackoff, options.Duration(DefaultReconnectMinBackoff))
	options.Default(&c.ReconnectMaxBackoff, options.Duration(DefaultReconnectMaxBackoff))
	return c
}

// minPullHeartbeat and maxPullHeartbeat are what nats.go accepts for a
// pull that expires after pullExpiry: at least half a second, and at most
// half the pull's life.
const (
	minPullHeartbeat = 500 * time.Millisecond
	maxPullHeartbeat = pullExpiry / 2
)

// pullExpiry is how long each pull a consumer's client sends lives: nats.go's
// default.
const pullExpiry = 30 * time.Second

func validScheme(s string) bool { return s == "nats" || s == "tls" }

// validName is what NATS accepts as a stream or consumer name, narrowed to
// what reads well in a config file.
func validName(s string) bool {
	for _, r := range s {
		if !(r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return s != ""
}

// validToken is what one subject token may hold: no separator, wildcard,
// or white space.
func validToken(s string) bool {
	return s != "" && !strings.ContainsAny(s, ".*> \t\r\n")
}
