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
// server sees one review per identity and route per TTL, not one per event.
package kubeauth

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/workwire/sdk-go/options/grpc/server"
)

// TokenReview is a server.Authenticator that asks the Kubernetes
// TokenReview API who a bearer token belongs to. It handles tokens only;
// combine it with server.CertificateAuthenticator through
// server.AnyAuthenticator to accept client certificates too. It is
// goroutine-safe.
type TokenReview struct {
	client    kubernetes.Interface
	audiences []string
}

var _ server.Authenticator = (*TokenReview)(nil)

// NewTokenReview returns a TokenReview authenticator over client that
// accepts tokens issued for any of audiences (none: the API server's
// default audiences).
func NewTokenReview(client kubernetes.Interface, audiences ...string) *TokenReview {
	return &TokenReview{client: client, audiences: audiences}
}

// Authenticate implements server.Authenticator. It makes one API call; if
// the API server cannot answer, the caller gets Unavailable.
func (a *TokenReview) Authenticate(ctx context.Context, creds server.Credentials) (server.Identity, error) {
	if creds.Token == "" {
		return server.Identity{}, server.ErrNoCredentials
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
		return server.Identity{}, errors.New(reason)
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
		return fmt.Errorf("%w: %s may not %s %s/%s %q: %s", server.ErrDenied, id.User, attrs.Verb, attrs.Group, attrs.Resource, attrs.Name, res.Status.Reason)
	}
	return nil
}
