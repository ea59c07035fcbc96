package kafka

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/IBM/sarama"

	"github.com/workwire/sdk-go/options"
)

// Defaults of Config.
const (
	DefaultClientID            = "workwire"
	DefaultGroupPrefix         = "workwire"
	DefaultSpecTopic           = "workwire.spec"
	DefaultStatusTopic         = "workwire.status"
	DefaultSpecResyncTopic     = "workwire.specresync"
	DefaultStatusResyncTopic   = "workwire.statusresync"
	DefaultMaxEventBytes       = 1_000_000 // sarama's and the Java client's default max.request.size
	DefaultMaxPending          = 10_000
	DefaultSessionTimeout      = 10 * time.Second
	DefaultHeartbeatInterval   = 3 * time.Second
	DefaultRebalanceTimeout    = 60 * time.Second
	DefaultDrainTimeout        = 2 * time.Second
	DefaultDialTimeout         = 10 * time.Second
	DefaultReconnectMinBackoff = 100 * time.Millisecond
	DefaultReconnectMaxBackoff = 30 * time.Second
)

// DefaultVersion is the Kafka protocol version the transport asks for
// unless Config.Version says otherwise: 4.3.1, the newest sarama v1.61.1
// knows, and the newest it can use against kfake (the embedded cluster of
// kafkatest): every test of this package and the generic scenarios run with
// it. From 2.4.0 on, sarama asks each broker which request versions it
// supports (ApiVersions) and sends the highest both sides know, so this
// default also works against older brokers (Apache Kafka 2.4 and later; set
// an older Version, at least 2.1.0, for brokers older than 2.4).
//
// sarama v1.45.2, which the module used first, could not go past 2.3.0
// against kfake: it failed to decode the null metadata kfake sends in
// OffsetFetch v6+ answers for partitions without a committed offset, so no
// new consumer group ever started; it also had a data race on reconnect
// (IBM/sarama#3017) that the broker restart tests hit under -race.
const DefaultVersion = "4.3.1"

// minVersion is the oldest protocol version Validate accepts: record headers
// (carrying CloudEvents attributes in binary mode) need 0.11, and the
// broker-side member IDs of consumer groups are settled from 2.1 on.
var minVersion = sarama.V2_1_0_0

// Config is the Kafka transport's configuration, as a config file holds it
// (see LoadConfig). The zero value of each optional field means its default.
type Config struct {
	// Brokers are the bootstrap brokers, host:port each. Required.
	Brokers []string `json:"brokers"`
	// ClientID is the Kafka client ID, shown in broker logs and quotas.
	// Default: DefaultClientID.
	ClientID string `json:"clientID,omitempty"`
	// Version is the Kafka protocol version, e.g. "3.6.0". Default:
	// DefaultVersion. Oldest accepted: 2.1.0.
	Version string `json:"version,omitempty"`
	// TLS turns TLS on when any field is set; a CA alone means TLS with no
	// client certificate. Setting CertFile and KeyFile gives mutual TLS.
	TLS options.TLSConfig `json:"tls,omitempty"`
	// SASL authenticates with a user name and password. Default: none.
	SASL *SASLConfig `json:"sasl,omitempty"`
	// Topics names the topic of each role. Default: DefaultSpecTopic,
	// DefaultStatusTopic, DefaultSpecResyncTopic, DefaultStatusResyncTopic.
	Topics Topics `json:"topics,omitempty"`
	// GroupPrefix starts the consumer group IDs the transport derives from
	// its subscriptions: "<prefix>.agent.<cluster>" for an agent,
	// "<prefix>.source.<source ID>" for a source, so all replicas of one
	// source share one group. Default: DefaultGroupPrefix.
	GroupPrefix string `json:"groupPrefix,omitempty"`
	// GroupID replaces the derived consumer group ID. Every transport in
	// one group must subscribe alike. Default: derived (see GroupPrefix).
	GroupID string `json:"groupID,omitempty"`
	// InitialOffset is where a consumer group without a committed offset
	// starts reading a partition: "newest" (default; what was sent earlier
	// reaches the client through the resync it runs at start) or "oldest".
	InitialOffset string `json:"initialOffset,omitempty"`
	// ReadAllPartitions makes a transport read every partition of its topics
	// and keep the events of its IDs by message key, instead of reading only
	// the partition its ID hashes to where a subscription fixes the key (an
	// agent's cluster name on the spec topic). Set it when producers other
	// than this transport write with a partitioner other than Kafka's default
	// (murmur2 of the key, see PartitionFor). Default: false.
	ReadAllPartitions bool `json:"readAllPartitions,omitempty"`
	// MaxEventBytes rejects larger events at Send with options.ErrTooLarge.
	// It is the producer's max message size; keep it at or below the
	// broker's message.max.bytes. Default: DefaultMaxEventBytes.
	MaxEventBytes int `json:"maxEventBytes,omitempty"`
	// MaxPending is how many received events of one partition may wait for
	// Delivery.Done at once; the partition pauses while it is reached.
	// Default: DefaultMaxPending.
	MaxPending int `json:"maxPending,omitempty"`
	// Compression of produced batches: "none" (default), "gzip", "snappy",
	// "lz4" or "zstd".
	Compression string `json:"compression,omitempty"`
	// SessionTimeout, HeartbeatInterval and RebalanceTimeout are the
	// consumer group timings. Defaults: DefaultSessionTimeout,
	// DefaultHeartbeatInterval, DefaultRebalanceTimeout. The broker bounds
	// SessionTimeout (group.min/max.session.timeout.ms).
	SessionTimeout    options.Duration `json:"sessionTimeout,omitempty"`
	HeartbeatInterval options.Duration `json:"heartbeatInterval,omitempty"`
	RebalanceTimeout  options.Duration `json:"rebalanceTimeout,omitempty"`
	// DrainTimeout is how long a consumer that gives its partitions up (a
	// rebalance or Close) waits at most for deliveries in flight to be Done,
	// so their offsets are committed and the next owner does not receive
	// them again; it stops waiting earlier once none has been Done for
	// 250ms. Must be below RebalanceTimeout. Default: DefaultDrainTimeout.
	DrainTimeout options.Duration `json:"drainTimeout,omitempty"`
	// DialTimeout bounds each TCP (and TLS) connect. Default: DefaultDialTimeout.
	DialTimeout options.Duration `json:"dialTimeout,omitempty"`
	// ReconnectMinBackoff and ReconnectMaxBackoff bound the capped
	// exponential backoff between attempts to connect and to rejoin the
	// consumer group. Defaults: DefaultReconnectMinBackoff,
	// DefaultReconnectMaxBackoff.
	ReconnectMinBackoff options.Duration `json:"reconnectMinBackoff,omitempty"`
	ReconnectMaxBackoff options.Duration `json:"reconnectMaxBackoff,omitempty"`
}

// SASL mechanisms SASLConfig accepts.
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// SASLConfig is SASL authentication with a user name and password.
type SASLConfig struct {
	// Mechanism is SASLPlain, SASLScramSHA256 or SASLScramSHA512. Required.
	// PLAIN sends the password in the clear: use it with TLS only.
	Mechanism string `json:"mechanism"`
	// Username is the user to authenticate as. Required.
	Username string `json:"username"`
	// Password is the password, inline. Exactly one of Password and
	// PasswordFile is required. Passwords are used as given (no SASLprep),
	// as Kafka brokers do.
	Password string `json:"password,omitempty"`
	// PasswordFile names a file that holds the password, such as a key of a
	// Kubernetes Secret mounted as a volume; a trailing newline is not part
	// of it. The transport reads it again for every connection it opens to
	// a broker, the first and every reconnect, so a rotated Secret is used
	// from the next connection on without a restart (connections already
	// authenticated stay up). Validate checks that it can be read and is not
	// empty. With SASLPlain the transport authenticates each connection
	// itself (see WithSaramaConfig). Default: none.
	PasswordFile string `json:"passwordFile,omitempty"`
}

// Topics names the topic of each role; one topic carries every event of its
// role. An empty name means the role's default.
type Topics struct {
	// Spec carries specs from sources to clusters, keyed by cluster name.
	// Default: DefaultSpecTopic.
	Spec string `json:"spec,omitempty"`
	// Status carries statuses from clusters to sources, keyed by cluster name.
	// Default: DefaultStatusTopic.
	Status string `json:"status,omitempty"`
	// SpecResync carries agents' spec resync requests to every source,
	// keyed by cluster name. Default: DefaultSpecResyncTopic.
	SpecResync string `json:"specResync,omitempty"`
	// StatusResync carries sources' status resync requests to every agent,
	// keyed by source ID. Default: DefaultStatusResyncTopic.
	StatusResync string `json:"statusResync,omitempty"`
}

// DefaultTopics returns the default topic of every role.
func DefaultTopics() Topics {
	return Topics{
		Spec:         DefaultSpecTopic,
		Status:       DefaultStatusTopic,
		SpecResync:   DefaultSpecResyncTopic,
		StatusResync: DefaultStatusResyncTopic,
	}
}

// Topic returns the topic of role r, or its default when t leaves it
// empty, or "" for an unknown role.
func (t Topics) Topic(r options.Role) string {
	var name, def string
	switch r {
	case options.RoleSpec:
		name, def = t.Spec, DefaultSpecTopic
	case options.RoleStatus:
		name, def = t.Status, DefaultStatusTopic
	case options.RoleSpecResync:
		name, def = t.SpecResync, DefaultSpecResyncTopic
	case options.RoleStatusResync:
		name, def = t.StatusResync, DefaultStatusResyncTopic
	default:
		return ""
	}
	if name == "" {
		return def
	}
	return name
}

// Names returns the four topics, defaults filled in, in role order (spec,
// status, spec resync, status resync): what a cluster must have.
func (t Topics) Names() []string {
	out := make([]string, 0, len(roles))
	for _, r := range roles {
		out = append(out, t.Topic(r))
	}
	return out
}

var roles = [...]options.Role{options.RoleSpec, options.RoleStatus, options.RoleSpecResync, options.RoleStatusResync}

// Key returns the message key Send gives an event on route r: the cluster
// name, or for RoleStatusResync (which names no cluster) the source ID. Kafka
// keeps the events of one key in order, in one partition.
func Key(r options.Route) string {
	if r.Role == options.RoleStatusResync {
		return r.Source
	}
	return r.Cluster
}

// LoadConfig reads a Config from a YAML or JSON file and validates it.
func LoadConfig(path string) (Config, error) { return options.LoadConfig[Config](path) }

// Validate reports every problem of c at once. It reads the TLS files and
// the SASL password file c names.
func (c Config) Validate() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("brokers: at least one host:port is required"))
	}
	for i, b := range c.Brokers {
		if host, port, err := net.SplitHostPort(b); err != nil || host == "" || port == "" {
			errs = append(errs, fmt.Errorf("brokers[%d] %q: want host:port", i, b))
		}
	}
	if _, err := c.version(); err != nil {
		errs = append(errs, err)
	}
	if c.SASL != nil {
		if err := c.SASL.validate(); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, c.Topics.validate()...)
	if c.GroupPrefix != "" {
		if err := validateName("groupPrefix", c.GroupPrefix); err != nil {
			errs = append(errs, err)
		}
	}
	if c.GroupID != "" && strings.TrimSpace(c.GroupID) != c.GroupID {
		errs = append(errs, fmt.Errorf("groupID %q: leading or trailing space", c.GroupID))
	}
	switch c.InitialOffset {
	case "", "newest", "oldest":
	default:
		errs = append(errs, fmt.Errorf("initialOffset %q: want newest or oldest", c.InitialOffset))
	}
	if _, err := c.compression(); err != nil {
		errs = append(errs, err)
	}
	if c.MaxEventBytes < 0 {
		errs = append(errs, fmt.Errorf("maxEventBytes %d: want 0 (default) or more", c.MaxEventBytes))
	}
	if c.MaxPending < 0 {
		errs = append(errs, fmt.Errorf("maxPending %d: want 0 (default) or more", c.MaxPending))
	}
	for _, d := range []struct {
		name string
		v    options.Duration
	}{
		{"sessionTimeout", c.SessionTimeout}, {"heartbeatInterval", c.HeartbeatInterval},
		{"rebalanceTimeout", c.RebalanceTimeout}, {"drainTimeout", c.DrainTimeout}, {"dialTimeout", c.DialTimeout},
		{"reconnectMinBackoff", c.ReconnectMinBackoff}, {"reconnectMaxBackoff", c.ReconnectMaxBackoff},
	} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s %v: want 0 (default) or more", d.name, time.Duration(d.v)))
		}
	}
	d := c.withDefaults()
	if d.HeartbeatInterval >= d.SessionTimeout {
		errs = append(errs, fmt.Errorf("heartbeatInterval %v must be below sessionTimeout %v", time.Duration(d.HeartbeatInterval), time.Duration(d.SessionTimeout)))
	}
	if d.DrainTimeout >= d.RebalanceTimeout {
		errs = append(errs, fmt.Errorf("drainTimeout %v must be below rebalanceTimeout %v", time.Duration(d.DrainTimeout), time.Duration(d.RebalanceTimeout)))
	}
	if c.ReconnectMaxBackoff > 0 && c.ReconnectMinBackoff > c.ReconnectMaxBackoff {
		errs = append(errs, fmt.Errorf("reconnectMinBackoff %v exceeds reconnectMaxBackoff %v", time.Duration(c.ReconnectMinBackoff), time.Duration(c.ReconnectMaxBackoff)))
	}
	if err := c.TLS.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("kafka config: %w", errors.Join(errs...))
	}
	return nil
}

func (s *SASLConfig) validate() error {
	var errs []error
	switch s.Mechanism {
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
	case "":
		errs = append(errs, fmt.Errorf("mechanism is required (%s, %s or %s)", SASLPlain, SASLScramSHA256, SASLScramSHA512))
	default:
		errs = append(errs, fmt.Errorf("mechanism %q: want %s, %s or %s", s.Mechanism, SASLPlain, SASLScramSHA256, SASLScramSHA512))
	}
	if s.Username == "" {
		errs = append(errs, errors.New("username is required"))
	}
	switch {
	case s.Password != "" && s.PasswordFile != "":
		errs = append(errs, errors.New("password and passwordFile are both set; want one"))
	case s.PasswordFile != "":
		if _, err := s.readPassword(); err != nil {
			errs = append(errs, err)
		}
	case s.Password == "":
		errs = append(errs, errors.New("password or passwordFile is required"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("sasl: %w", errors.Join(errs...))
	}
	return nil
}

func (t Topics) validate() []error {
	var errs []error
	seen := map[string]options.Role{}
	for _, r := range roles {
		name := t.Topic(r)
		if err := validateName(fmt.Sprintf("topics.%s", r), name); err != nil {
			errs = append(errs, err)
			continue
		}
		if other, ok := seen[name]; ok {
			errs = append(errs, fmt.Errorf("topics: %s and %s share topic %q; each role needs its own", other, r, name))
		}
		seen[name] = r
	}
	return errs
}

// validateName checks a Kafka topic name (or a part of a group ID): 1 to
// 249 characters of [a-zA-Z0-9._-], and not "." or "..".
func validateName(field, name string) error {
	if name == "" || len(name) > 249 || name == "." || name == ".." {
		return fmt.Errorf("%s %q: want 1 to 249 characters, not \".\" or \"..\"", field, name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("%s %q: only letters, digits, '.', '_' and '-' are allowed", field, name)
		}
	}
	return nil
}

func (c Config) version() (sarama.KafkaVersion, error) {
	s := c.Version
	if s == "" {
		s = DefaultVersion
	}
	v, err := sarama.ParseKafkaVersion(s)
	if err != nil {
		return v, fmt.Errorf("version %q: want a Kafka release such as \"3.7.0\": %w", s, err)
	}
	if !v.IsAtLeast(minVersion) {
		return v, fmt.Errorf("version %q: want %s or newer", s, minVersion)
	}
	return v, nil
}

func (c Config) compression() (sarama.CompressionCodec, error) {
	switch c.Compression {
	case "", "none":
		return sarama.CompressionNone, nil
	case "gzip":
		return sarama.CompressionGZIP, nil
	case "snappy":
		return sarama.CompressionSnappy, nil
	case "lz4":
		return sarama.CompressionLZ4, nil
	case "zstd":
		return sarama.CompressionZSTD, nil
	}
	return sarama.CompressionNone, fmt.Errorf("compression %q: want none, gzip, snappy, lz4 or zstd", c.Compression)
}

// withDefaults returns c with every optional field that is zero set to
// its default. New applies it once; the transport reads c's fields as
// they are.
func (c Config) withDefaults() Config {
	options.Default(&c.SessionTimeout, options.Duration(DefaultSessionTimeout))
	options.Default(&c.HeartbeatInterval, options.Duration(DefaultHeartbeatInterval))
	options.Default(&c.RebalanceTimeout, options.Duration(DefaultRebalanceTimeout))
	options.Default(&c.DrainTimeout, options.Duration(DefaultDrainTimeout))
	options.Default(&c.DialTimeout, options.Duration(DefaultDialTimeout))
	options.Default(&c.ReconnectMinBackoff, options.Duration(DefaultReconnectMinBackoff))
	options.Default(&c.ReconnectMaxBackoff, options.Duration(DefaultReconnectMaxBackoff))
	options.Default(&c.MaxEventBytes, DefaultMaxEventBytes)
	options.Default(&c.MaxPending, DefaultMaxPending)
	options.Default(&c.ClientID, DefaultClientID)
	options.Default(&c.GroupPrefix, DefaultGroupPrefix)
	return c
}
