package kubeservice

import (
	"context"
	"fmt"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/go-logr/logr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options/grpc/server"
)

// TokenRequestCodec carries ServiceAccount token requests and their
// answers, as OCM's agents and hub do: the TokenRequest with its request
// UID as resourceid, and the service account's namespace, which is the
// cluster's, as clustername.
var TokenRequestCodec = mustCodec(authenticationv1.SchemeGroupVersion.WithKind("TokenRequest"), "tokenrequests",
	func(r *authenticationv1.TokenRequest) string { return r.Namespace })

var serviceAccountResource = corev1.Resource("serviceaccounts")

// answerTTL is how long a token stays in memory for the server to send it
// to the agent that asked: it goes out at once, and no longer than needed.
const answerTTL = 30 * time.Second

// TokenRequests is the Service of ServiceAccount token requests (OCM
// registers add-ons by token through it). An agent asks, with a spec
// create_request, for a token of a service account in its cluster's
// namespace; the Service creates it through the kube-apiserver's
// TokenRequest API and sends the TokenRequest back, the agent's request UID
// kept, as a spec create_request to that cluster's agents subscribed to
// token requests. A request for a service account of another namespace is
// Forbidden, and nothing is created. Nothing is listed or resynced: agents
// keep no tokens the hub could compare.
//
// The hub's own client creates the tokens: whoever may publish token
// requests for a cluster (see kubeauth.ResourceAttributes, or
// hub.Authorizer) gets tokens of the service accounts of its namespace. It
// is goroutine-safe.
type TokenRequests struct {
	client   kubernetes.Interface
	sourceID string
	log      logr.Logger

	mu       sync.Mutex
	handlers []server.EventHandler
	answers  map[string]tokenAnswer // by request UID
}

type tokenAnswer struct {
	answer  *authenticationv1.TokenRequest
	expires time.Time
}

var (
	_ server.Service  = (*TokenRequests)(nil)
	_ server.Resyncer = (*TokenRequests)(nil)
)

// NewTokenRequests returns the Service of token requests over client.
func NewTokenRequests(client kubernetes.Interface, sourceID string, opts ...Option) (*TokenRequests, error) {
	if client == nil {
		return nil, fmt.Errorf("new token request service: client is required")
	}
	if sourceID == "" {
		return nil, fmt.Errorf("new token request service: sourceID is empty")
	}
	o := options{log: logr.Discard()}
	for _, opt := range opts {
		opt(&o)
	}
	return &TokenRequests{client: client, sourceID: sourceID, answers: make(map[string]tokenAnswer),
		log: o.log.WithValues("dataType", TokenRequestCodec.DataType().String())}, nil
}

// Resyncs implements server.Resyncer: token requests are never resynced.
func (s *TokenRequests) Resyncs() bool { return false }

// Get implements server.Service: the answer to the request of resourceID,
// while it waits to be sent.
func (s *TokenRequests) Get(_ context.Context, resourceID string) (*cloudevents.Event, error) {
	s.mu.Lock()
	a, ok := s.answers[resourceID]
	s.mu.Unlock()
	if !ok || time.Now().After(a.expires) {
		return nil, fmt.Errorf("%s %s: %w", TokenRequestCodec.DataType(), resourceID, server.ErrNotFound)
	}
	return TokenRequestCodec.Encode(s.sourceID, types.EventType{DataType: TokenRequestCodec.DataType(), SubResource: types.SubResourceSpec, Action: types.CreateRequest}, a.answer)
}

// List implements server.Service: token requests are not listed.
func (s *TokenRequests) List(context.Context, server.ListOptions) ([]*cloudevents.Event, error) {
	return nil, nil
}

// RegisterHandler implements server.Service.
func (s *TokenRequests) RegisterHandler(h server.EventHandler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handlers = append(s.handlers, h)
}

// HandleStatusUpdate implements server.Service: it creates the token an
// agent asks for and has it sent to the agent. A Kubernetes error (the
// service account does not exist, say) reaches the agent as one.
func (s *TokenRequests) HandleStatusUpdate(ctx context.Context, evt *cloudevents.Event) error {
	t, err := types.ParseEventType(evt.Type())
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "event %s: %v", evt.ID(), err)
	}
	if t.SubResource != types.SubResourceSpec || t.Action != types.CreateRequest {
		return agentError(notAllowed(TokenRequestCodec.DataType(), t))
	}
	req, err := generic.Decode(TokenRequestCodec, evt)
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "%v", err)
	}
	cluster, _, _ := types.StringExtension(evt, types.ExtClusterName)
	if err := checkTokenRequest(req, cluster); err != nil {
		return agentError(err)
	}
	created, err := s.client.CoreV1().ServiceAccounts(req.Namespace).CreateToken(ctx, req.Name,
		&authenticationv1.TokenRequest{Spec: req.Spec}, metav1.CreateOptions{})
	if err != nil {
		return agentError(err)
	}
	answer := &authenticationv1.TokenRequest{
		ObjectMeta: metav1.ObjectMeta{Name: req.Name, Namespace: req.Namespace, UID: req.UID},
		Spec:       created.Spec,
		Status:     created.Status,
	}
	id := string(req.UID)
	now := time.Now()
	s.mu.Lock()
	for k, a := range s.answers {
		if now.After(a.expires) {
			delete(s.answers, k)
		}
	}
	s.answers[id] = tokenAnswer{answer: answer, expires: now.Add(answerTTL)}
	handlers := append([]server.EventHandler(nil), s.handlers...)
	s.mu.Unlock()
	s.log.V(4).Info("created a token", "namespace", req.Namespace, "serviceAccount", req.Name, "requestID", id)
	for _, h := range handlers {
		if err := h.OnCreate(ctx, TokenRequestCodec.DataType().String(), id); err != nil {
			s.log.Error(err, "sending a token", "namespace", req.Namespace, "serviceAccount", req.Name, "requestID", id)
		}
	}
	return nil
}

// checkTokenRequest refuses a request the Service cannot answer (no UID to
// answer it by, no service account) or that is not cluster's to make.
func checkTokenRequest(req *authenticationv1.TokenRequest, cluster string) error {
	switch {
	case req.UID == "":
		return apierrors.NewBadRequest("a token request carries its request UID, by which the answer reaches the agent")
	case req.Name == "":
		return apierrors.NewBadRequest("a token request names its service account")
	case cluster == "" || req.Namespace != cluster:
		return apierrors.NewForbidden(serviceAccountResource, req.Name,
			fmt.Errorf("the agent of cluster %q asks for a token of a service account in namespace %q: an agent's tokens are of its cluster's namespace alone", cluster, req.Namespace))
	}
	return nil
}
