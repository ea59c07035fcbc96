package server

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options"
)

// Identity is who a caller is, as an Authenticator verified it.
type Identity struct {
	// User is the user name: a client certificate's common name, or the
	// user a token belongs to.
	User string
	// Groups are the user's groups: a client certificate's organizations,
	// or the groups a token review returns.
	Groups []string
	// UID and Extra are what a token review returns beside; they reach a
	// SubjectAccessReview unchanged. Optional.
	UID   string
	Extra map[string][]string
}

// Credentials are what a caller presented.
type Credentials struct {
	// Token is the bearer token of the "authorization" header, "" if none.
	Token string
	// Certificates is the client certificate chain TLS verified against the
	// server's client CAs, leaf first; empty without mutual TLS.
	Certificates []*x509.Certificate
}

// ErrNoCredentials is returned by an Authenticator for credentials of a kind
// it does not handle (no token, no certificate), so that the next
// authenticator of AnyAuthenticator can try.
var ErrNoCredentials = errors.New("no credentials")

// ErrDenied is wrapped by an Authorizer's error for a request it refuses;
// the caller gets PermissionDenied. Any other error is a failure to decide
// (the caller gets Unavailable and may retry).
var ErrDenied = errors.New("permission denied")

// Authenticator verifies who a caller is. Implementations must be
// goroutine-safe; the server caches the identities they return for
// Config.AuthCacheTTL, but not their failures: an Authenticator whose
// rejections are costly remembers them itself (kubeauth.TokenReview does).
type Authenticator interface {
	// Authenticate returns the identity creds prove. It returns an error
	// wrapping ErrNoCredentials when creds hold nothing it handles, and
	// another error when they are invalid.
	Authenticate(ctx context.Context, creds Credentials) (Identity, error)
}

// Verb is what a caller asks to do.
type Verb string

const (
	// VerbPublish is a Publish of one event.
	VerbPublish Verb = "publish"
	// VerbSubscribe is a Subscribe.
	VerbSubscribe Verb = "subscribe"
)

// Request is what an Authorizer decides on. It never holds anything the
// caller claims about itself beyond the route it asks for: the identity is
// the verified one.
type Request struct {
	Verb Verb
	// Role is the published event's role; for a Subscribe, RoleSpec for an
	// agent's subscription and RoleStatus for a source's.
	Role options.Role
	// Source and Cluster are the route's IDs (one or both, by role).
	Source  string
	Cluster string
	// DataType is the event's data type, or one subscribed data type ("" for
	// a subscription to every data type).
	DataType string
	// SubResource and Action are the published event's (spec or status;
	// create_request, update_request, ...); empty for a Subscribe.
	SubResource types.SubResource
	Action      types.Action
}

// ActsAs returns the one ID the caller must own for r: a source ID for what
// only a source does (publishing spec and status resync, subscribing as a
// source), else a cluster name (publishing status and spec resync,
// subscribing as an agent).
func (r Request) ActsAs() (source, cluster string) {
	switch {
	case r.Verb == VerbSubscribe && r.Role == options.RoleStatus,
		r.Verb == VerbPublish && (r.Role == options.RoleSpec || r.Role == options.RoleStatusResync):
		return r.Source, ""
	default:
		return "", r.Cluster
	}
}

// Authorizer decides whether an identity may make a request: an agent may
// publish and subscribe only for its own cluster, a source only for its own
// source ID. Implementations must be goroutine-safe; the server caches
// their decisions for Config.AuthCacheTTL.
type Authorizer interface {
	// Authorize returns nil to allow, an error wrapping ErrDenied to refuse,
	// and any other error when it cannot decide.
	Authorize(ctx context.Context, id Identity, req Request) error
}

// CertificateAuthenticator authenticates a caller by its verified client
// certificate, as Kubernetes does: the common name is the user and the
// organizations are the groups. It needs mutual TLS (Config.TLS.ClientCAFile).
type CertificateAuthenticator struct{}

// Authenticate implements Authenticator.
func (CertificateAuthenticator) Authenticate(_ context.Context, creds Credentials) (Identity, error) {
	if len(creds.Certificates) == 0 {
		return Identity{}, ErrNoCredentials
	}
	leaf := creds.Certificates[0]
	if leaf.Subject.CommonName == "" {
		return Identity{}, errors.New("client certificate has no common name")
	}
	return Identity{User: leaf.Subject.CommonName, Groups: slices.Clone(leaf.Subject.Organization)}, nil
}

// StaticAuthenticator authenticates callers from fixed tables. The zero
// value knows no one.
type StaticAuthenticator struct {
	// Tokens maps bearer tokens to identities.
	Tokens map[string]Identity
	// CommonNames maps the common names of verified client certificates to
	// identities; a certificate whose name is absent is refused. Nil: a
	// certificate is not something this authenticator handles.
	CommonNames map[string]Identity
}

// Authenticate implements Authenticator. A token, when present, wins over a
// certificate.
func (s StaticAuthenticator) Authenticate(_ context.Context, creds Credentials) (Identity, error) {
	if creds.Token != "" {
		if id, ok := s.Tokens[creds.Token]; ok {
			return id, nil
		}
		return Identity{}, errors.New("unknown token")
	}
	if len(creds.Certificates) > 0 && s.CommonNames != nil {
		cn := creds.Certificates[0].Subject.CommonName
		if id, ok := s.CommonNames[cn]; ok {
			return id, nil
		}
		return Identity{}, fmt.Errorf("unknown client certificate %q", cn)
	}
	return Identity{}, ErrNoCredentials
}

// AnyAuthenticator tries each authenticator in turn and returns the first
// answer other than ErrNoCredentials: for example a TokenReview
// authenticator for tokens, then CertificateAuthenticator for certificates.
func AnyAuthenticator(as ...Authenticator) Authenticator { return anyAuthenticator(as) }

type anyAuthenticator []Authenticator

func (as anyAuthenticator) Authenticate(ctx context.Context, creds Credentials) (Identity, error) {
	for _, a := range as {
		id, err := a.Authenticate(ctx, creds)
		if errors.Is(err, ErrNoCredentials) {
			continue
		}
		return id, err
	}
	return Identity{}, ErrNoCredentials
}

// StaticAuthorizer authorizes from fixed tables of who may act as which
// source and which cluster's agent. A user or group not listed may do
// nothing. The zero value refuses everything.
type StaticAuthorizer struct {
	// Sources maps a user name (or "group:" and a group name) to the source
	// IDs it may act as.
	Sources map[string][]string
	// Clusters maps a user name (or "group:" and a group name) to the
	// clusters whose agent it may act as.
	Clusters map[string][]string
}

// Authorize implements Authorizer.
func (s StaticAuthorizer) Authorize(_ context.Context, id Identity, req Request) error {
	source, cluster := req.ActsAs()
	table, want, what := s.Clusters, cluster, "cluster"
	if source != "" {
		table, want, what = s.Sources, source, "source"
	}
	if want != "" {
		keys := append([]string{id.User}, prefixed("group:", id.Groups)...)
		for _, k := range keys {
			if slices.Contains(table[k], want) {
				return nil
			}
		}
	}
	return fmt.Errorf("%w: %q may not %s as %s %q", ErrDenied, id.User, req.Verb, what, want)
}

func prefixed(p string, ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = p + s
	}
	return out
}

// ttlCache remembers answers for a while. It holds at most max entries; when
// full it drops the expired ones, and if that is not enough, all of them.
type ttlCache[V any] struct {
	ttl time.Duration
	max int
	now func() time.Time

	mu sync.Mutex
	m  map[string]cacheEntry[V]
}

type cacheEntry[V any] struct {
	v       V
	err     error
	expires time.Time
}

func newTTLCache[V any](ttl time.Duration, max int) *ttlCache[V] {
	return &ttlCache[V]{ttl: ttl, max: max, now: time.Now, m: make(map[string]cacheEntry[V])}
}

// get returns the cached answer for key, or computes, caches and returns it.
// Answers that are failures to decide (keep(err) false) are not cached.
func (c *ttlCache[V]) get(key string, compute func() (V, error), keep func(error) bool) (V, error) {
	if c.ttl <= 0 {
		return compute()
	}
	now := c.now()
	c.mu.Lock()
	e, ok := c.m[key]
	c.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.v, e.err
	}
	v, err := compute()
	if err != nil && !keep(err) {
		return v, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		for k, e := range c.m {
			if !now.Before(e.expires) {
				delete(c.m, k)
			}
		}
		if len(c.m) >= c.max {
			clear(c.m)
		}
	}
	c.m[key] = cacheEntry[V]{v: v, err: err, expires: now.Add(c.ttl)}
	return v, err
}

// credentialsKey identifies credentials in a cache without keeping the
// token itself.
func credentialsKey(creds Credentials) string {
	h := sha256.New()
	h.Write([]byte(creds.Token))
	for _, c := range creds.Certificates {
		h.Write([]byte{0})
		h.Write(c.Raw)
	}
	return string(h.Sum(nil))
}

func requestKey(id Identity, req Request) string {
	h := sha256.New()
	fmt.Fprintf(h, "%q %q %q %v %q %q %q %q", id.User, id.UID, id.Groups, id.Extra, req.Verb, req.Role, req.Source, req.Cluster)
	fmt.Fprintf(h, " %q %q %q", req.DataType, req.SubResource, req.Action)
	return string(h.Sum(nil))
}

type identityKey struct{}

// WithIdentity returns ctx carrying id. The server hands a Service the
// context of each call this way.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFrom returns the verified identity of the caller whose call ctx
// belongs to: a Service learns who published the event it handles (the
// user an agent's CSR is created for, say). ok is false outside a call.
func IdentityFrom(ctx context.Context) (id Identity, ok bool) {
	id, ok = ctx.Value(identityKey{}).(Identity)
	return id, ok
}
