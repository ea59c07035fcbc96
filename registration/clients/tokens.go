package clients

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/uuid"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubetypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/registration/kubeservice"
)

// TokenRequestTimeout bounds how long CreateToken waits for the hub's
// answer when its context has no deadline.
const TokenRequestTimeout = 30 * time.Second

// tokens asks the hub for ServiceAccount tokens: a request and its answer,
// matched by the request's UID, which the hub sends to every subscriber of
// the cluster's token requests. It holds nothing else.
type tokens struct {
	cluster string
	tr      options.Transport
	log     logr.Logger
	started atomic.Bool
	closed  atomic.Bool

	mu      sync.Mutex
	waiting map[kubetypes.UID]chan *authenticationv1.TokenRequest
}

var _ part = (*tokens)(nil)

func newTokens(config options.TransportConfig, cluster string, opts settings) (*tokens, error) {
	tr, err := config.NewTransport()
	if err != nil {
		return nil, err
	}
	t := &tokens{cluster: cluster, tr: tr, waiting: make(map[kubetypes.UID]chan *authenticationv1.TokenRequest)}
	if opts.loggerSet {
		t.log = opts.logger
	}
	return t, nil
}

func (t *tokens) Start(ctx context.Context) error {
	if t.log.GetSink() == nil {
		t.log = klog.FromContext(ctx)
	}
	t.log = t.log.WithValues("dataType", kubeservice.TokenRequestCodec.DataType().String())
	subs := []options.Subscription{{Role: options.RoleSpec, Cluster: t.cluster, DataTypes: []string{kubeservice.TokenRequestCodec.DataType().String()}}}
	if err := t.tr.Start(ctx, subs, t); err != nil {
		return err
	}
	t.started.Store(true)
	return nil
}

func (t *tokens) Close(ctx context.Context) error {
	t.closed.Store(true)
	return t.tr.Close(ctx)
}

func (t *tokens) Healthy() error {
	switch {
	case t.closed.Load():
		return fmt.Errorf("token requests: %w", generic.ErrClosed)
	case !t.started.Load():
		return fmt.Errorf("token requests: %w", generic.ErrNotStarted)
	}
	if hc, ok := t.tr.(options.HealthChecker); ok {
		return hc.Healthy()
	}
	return nil
}

// Deliver implements options.Receiver: an answer reaches the request that
// waits for it; any other event is dropped.
func (t *tokens) Deliver(d *options.Delivery) {
	defer d.Done()
	answer, err := generic.Decode(kubeservice.TokenRequestCodec, d.Event)
	if err != nil {
		t.log.Error(err, "a malformed token answer; dropped")
		return
	}
	t.mu.Lock()
	ch := t.waiting[answer.UID]
	t.mu.Unlock()
	if ch == nil {
		t.log.V(4).Info("an answer no request waits for; dropped", "requestID", answer.UID)
		return
	}
	select {
	case ch <- answer:
	default: // answered already
	}
}

// Malformed implements options.Receiver.
func (t *tokens) Malformed(err error) { t.log.Error(err, "a malformed message; dropped") }

// Connected implements options.Receiver: token requests are not resynced.
func (t *tokens) Connected() {}

var tokenResource = corev1.Resource("serviceaccounts/token")

// create asks the hub for a token of service account name in namespace,
// which must be the cluster's, and waits for its answer, or ctx
// (TokenRequestTimeout when ctx has no deadline).
func (t *tokens) create(ctx context.Context, namespace, name string, req *authenticationv1.TokenRequest, opts metav1.CreateOptions) (*authenticationv1.TokenRequest, error) {
	switch {
	case req == nil:
		return nil, apierrors.NewBadRequest("token request is nil")
	case name == "":
		return nil, apierrors.NewBadRequest("a token request names its service account")
	case namespace != t.cluster:
		return nil, apierrors.NewForbidden(tokenResource, name,
			fmt.Errorf("the agent of cluster %q asks for a token of a service account in namespace %q: an agent's tokens are of its cluster's namespace alone", t.cluster, namespace))
	case len(opts.DryRun) > 0:
		return nil, apierrors.NewBadRequest("a token request over events cannot be a dry run")
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, TokenRequestTimeout)
		defer cancel()
	}
	out := req.DeepCopy()
	out.Name, out.Namespace, out.UID = name, namespace, kubetypes.UID(uuid.NewString())
	ch := make(chan *authenticationv1.TokenRequest, 1)
	t.mu.Lock()
	t.waiting[out.UID] = ch
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		delete(t.waiting, out.UID)
		t.mu.Unlock()
	}()

	evt, err := kubeservice.TokenRequestCodec.Encode(t.cluster, types.EventType{
		DataType: kubeservice.TokenRequestCodec.DataType(), SubResource: types.SubResourceSpec, Action: types.CreateRequest}, out)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if err := t.tr.Send(ctx, options.Route{Role: options.RoleSpec, Source: t.cluster, Cluster: t.cluster}, evt); err != nil {
		var se *apierrors.StatusError
		if errors.As(err, &se) {
			return nil, se
		}
		return nil, apierrors.NewServiceUnavailable(err.Error())
	}
	select {
	case answer := <-ch:
		return answer, nil
	case <-ctx.Done():
		return nil, apierrors.NewTimeoutError(fmt.Sprintf("no answer from the hub to token request %s of %s/%s: %v", out.UID, namespace, name, context.Cause(ctx)), 0)
	}
}
