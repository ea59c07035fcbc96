// Package kubeauth authenticates and authorizes callers of the gRPC broker
// (options/grpc/server) through a Kubernetes API server: TokenReview checks
// bearer tokens (service account tokens, or any token the cluster's
// authenticators accept), and SubjectAccessReview asks the cluster's RBAC
// (or any authorizer it runs) whether an identity may act as a source or as
// a cluster's agent.
//
// With the default attributes, RBAC rules like these let the agent of
// cluster1 and the source "hub" in:
//
//	apiVersion: rbac.authorization.k8s.io/v1
//	kind: ClusterRole
//	metadata: {name: cluster1-agent}
//	rules:
//	- apiGroups: ["cloudevents.workwire.io"]
//	  resources: ["clusters"]
//	  resourceNames: ["cluster1"]
//	  verbs: ["publish", "subscribe"]
//	---
//	kind: ClusterRole
//	metadata: {name: hub-source}
//	rules:
//	- apiGroups: ["cloudevents.workwire.io"]
//	  resources: ["sources"]
//	  resourceNames: ["hub"]
//	  verbs: ["publish", "subscribe"]
//
// The broker caches both answers (server.Config.AuthCacheTTL), so the API
// server sees one review per identity, route and data type per TTL, not one
// per event.
// The broker caches only answers, never failures; TokenReview remembers
// the tokens the API server rejected for a short while itself
// (DefaultFailureTTL), so that a client retrying with a bad token does not
// cost a review per call.
package kubeauth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options/grpc/server"
)

// DefaultFailureTTL is how long TokenReview remembers that the API server
// rejected a token: long enough that a client retrying a bad token in a
// loop costs one review per 10s, short enough that a token rejected only
// because it was not yet valid everywhere is accepted soon after.
const DefaultFailureTTL = 10 * time.Second

// maxFailures bounds the rejected tokens TokenReview remembers; when full
// it forgets the expired ones, and if that is not enough, all of them.
const maxFailures = 10000

// TokenReviewOption configures a TokenReview.
type TokenReviewOption func(*TokenReview)

// WithAudiences makes TokenReview accept only tokens issued for one of
// audiences. Default: none, the API server's default audiences.
func WithAudiences(audiences ...string) TokenReviewOption {
	return func(a *TokenReview) { a.audiences = append(a.audiences, audiences...) }
}

// WithFailureTTL sets how long a token the API server rejected is rejected
// again without asking it; zero or negative asks every time. Only
// rejections are remembered, never a failure to reach the API server.
// Default: DefaultFailureTTL.
func WithFailureTTL(d time.Duration) TokenReviewOption {
	return func(a *TokenReview) { a.failureTTL = d }
}

// TokenReview is a server.Authenticator that asks the Kubernetes
// TokenReview API who a bearer token belongs to. It handles tokens only;
// combine it with server.CertificateAuthenticator through
// server.AnyAuthenticator to accept client certificates too. It remembers
// rejected tokens for a while (WithFailureTTL), keyed by their SHA-256,
// never the token itself. It is goroutine-safe.
type TokenReview struct {
	client     kubernetes.Interface
	audiences  []string
	failureTTL time.Duration
	now        func() time.Time

	mu       sync.Mutex
	failures map[[sha256.Size]byte]failure
}

type failure struct {
	err     error
	expires time.Time
}

var _ server.Authenticator = (*TokenReview)(nil)

// NewTokenReview returns a TokenReview authenticator over client.
func NewTokenReview(client kubernetes.Interface, opts ...TokenReviewOption) *TokenReview {
	a := &TokenReview{client: client, failureTTL: DefaultFailureTTL, now: time.Now, failures: map[[sha256.Size]byte]failure{}}
	for _, o := range opts {
		o(a)
	}
	return a
}

// Authenticate implements server.Authenticator. It makes one API call,
// unless the token was rejected less than the failure TTL ago; if the API
// server cannot answer, the caller gets Unavailable.
func (a *TokenReview) Authenticate(ctx context.Context, creds server.Credentials) (server.Identity, error) {
	if creds.Token == "" {
		return server.Identity{}, server.ErrNoCredentials
	}
	key := sha256.Sum256([]byte(creds.Token))
	if err := a.rejected(key); err != nil {
		return server.Identity{}, err
	}
	review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: creds.Token, Audiences: a.audiences}}
	res, err := a.client.AuthenticationV1().TokenReviews().Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		return server.Identity{}, status.Errorf(codes.Unavailable, "token review: %v", err)
	}
	if !res.Status.Authenticated {
		reason := res.Status.Error
		if reason == "" {
			reason = "token not authenticated"
		}
		err := errors.New(reason)
		a.reject(key, err)
		return server.Identity{}, err
	}
	u := res.Status.User
	id := server.Identity{User: u.Username, Groups: u.Groups, UID: u.UID}
	if len(u.Extra) > 0 {
		id.Extra = make(map[string][]string, len(u.Extra))
		for k, v := range u.Extra {
			id.Extra[k] = []string(v)
		}
	}
	return id, nil
}

// rejected returns the error of a remembered rejection of key, or nil.
func (a *TokenReview) rejected(key [sha256.Size]byte) error {
	if a.failureTTL <= 0 {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	f, ok := a.failures[key]
	if !ok {
		return nil
	}
	if !a.now().Before(f.expires) {
		delete(a.failures, key)
		return nil
	}
	return f.err
}

// reject remembers that key was rejected with err.
func (a *TokenReview) reject(key [sha256.Size]byte, err error) {
	if a.failureTTL <= 0 {
		return
	}
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.failures) >= maxFailures {
		for k, f := range a.failures {
			if !now.Before(f.expires) {
				delete(a.failures, k)
			}
		}
		if len(a.failures) >= maxFailures {
			clear(a.failures)
		}
	}
	a.failures[key] = failure{err: err, expires: now.Add(a.failureTTL)}
}

// DefaultGroup is the API group of the default SubjectAccessReview
// attributes.
const DefaultGroup = "cloudevents.workwire.io"

// Attributes maps an authorization request to the resource a
// SubjectAccessReview asks about.
type Attributes func(req server.Request) authorizationv1.ResourceAttributes

// DefaultAttributes asks about resource "sources" named by the source ID
// for what a source does, and resource "clusters" named by the cluster for
// what an agent does, in DefaultGroup, with the verb "publish" or
// "subscribe".
func DefaultAttributes(req server.Request) authorizationv1.ResourceAttributes {
	source, cluster := req.ActsAs()
	attrs := authorizationv1.ResourceAttributes{Group: DefaultGroup, Verb: string(req.Verb), Resource: "clusters", Name: cluster}
	if source != "" {
		attrs.Resource, attrs.Name = "sources", source
	}
	return attrs
}

// ResourceAttributes asks, as OCM's hub does for the agents that register
// over gRPC, about the resource an agent's event carries, so RBAC
// grants it type by type: the group and resource of its data type, the
// cluster as namespace (and as name, for ManagedClusters, which are
// cluster-scoped), the verb by action — create_request create,
// update_request update, delete_request delete, resync_request list, a
// subscription watch — and the subresource status for status events;
// a ServiceAccount token request is create (or, to subscribe to the
// answers, subscribe) on serviceaccounts/token. A
// bootstrap identity granted create and watch on managedclusters and
// certificatesigningrequests can then join and nothing else: it cannot
// subscribe to ManifestWorks. What a source does is asked as
// DefaultAttributes asks it.
func ResourceAttributes(req server.Request) authorizationv1.ResourceAttributes {
	source, cluster := req.ActsAs()
	if source != "" {
		return DefaultAttributes(req)
	}
	attrs := authorizationv1.ResourceAttributes{Namespace: cluster, Resource: "*", Group: "*"}
	if req.DataType != "" {
		dt, err := types.ParseDataType(req.DataType)
		if err != nil {
			// Asked about nothing RBAC grants: refused, as it should be.
			return authorizationv1.ResourceAttributes{Namespace: cluster, Verb: string(req.Verb), Group: "invalid.workwire.io", Resource: "invalid"}
		}
		attrs.Group, attrs.Resource = dt.Group, dt.Resource
	}
	if attrs.Resource == "managedclusters" {
		attrs.Name = cluster
	}
	if attrs.Group == "authentication.k8s.io" && attrs.Resource == "tokenrequests" {
		// ServiceAccount token requests, as OCM's hub asks about them:
		// serviceaccounts/token in the cluster's namespace, to subscribe
		// (for the answers) and to create.
		attrs.Group, attrs.Resource, attrs.Subresource, attrs.Verb = "", "serviceaccounts", "token", "create"
		if req.Verb == server.VerbSubscribe {
			attrs.Verb = "subscribe"
		}
		return attrs
	}
	switch {
	case req.Verb == server.VerbSubscribe:
		attrs.Verb = "watch"
	case req.Action == types.CreateRequest:
		attrs.Verb = "create"
	case req.Action == types.DeleteRequest:
		attrs.Verb = "delete"
	case req.Action == types.ResyncRequest:
		attrs.Verb = "list"
	default:
		attrs.Verb = "update"
	}
	if req.SubResource == types.SubResourceStatus && req.Action != types.ResyncRequest {
		attrs.Subresource = "status"
	}
	return attrs
}

// SubjectAccessReview is a server.Authorizer that asks the Kubernetes
// SubjectAccessReview API whether the verified identity may act as the
// source or cluster a request names. It is goroutine-safe.
type SubjectAccessReview struct {
	client kubernetes.Interface
	attrs  Attributes
}

var _ server.Authorizer = (*SubjectAccessReview)(nil)

// NewSubjectAccessReview returns a SubjectAccessReview authorizer over
// client; attrs maps requests to resources (nil: DefaultAttributes).
func NewSubjectAccessReview(client kubernetes.Interface, attrs Attributes) *SubjectAccessReview {
	if attrs == nil {
		attrs = DefaultAttributes
	}
	return &SubjectAccessReview{client: client, attrs: attrs}
}

// Authorize implements server.Authorizer. It makes one API call; if the API
// server cannot answer, the caller gets Unavailable.
func (a *SubjectAccessReview) Authorize(ctx context.Context, id server.Identity, req server.Request) error {
	attrs := a.attrs(req)
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: id.User, Groups: id.Groups, UID: id.UID, ResourceAttributes: &attrs,
	}}
	if len(id.Extra) > 0 {
		sar.Spec.Extra = make(map[string]authorizationv1.ExtraValue, len(id.Extra))
		for k, v := range id.Extra {
			sar.Spec.Extra[k] = v
		}
	}
	res, err := a.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return status.Errorf(codes.Unavailable, "subject access review: %v", err)
	}
	if !res.Status.Allowed || res.Status.Denied {
		what := attrs.Group + "/" + attrs.Resource
		if attrs.Subresource != "" {
			what += "/" + attrs.Subresource
		}
		if attrs.Name != "" {
			what += fmt.Sprintf(" %q", attrs.Name)
		}
		if attrs.Namespace != "" {
			what += fmt.Sprintf(" in namespace %q", attrs.Namespace)
		}
		return fmt.Errorf("%w: %s may not %s %s: %s", server.ErrDenied, id.User, attrs.Verb, what, res.Status.Reason)
	}
	return nil
}
