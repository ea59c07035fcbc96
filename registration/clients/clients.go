// Package clients hands a cluster's agent the clients of OCM's
// registration over the gRPC broker: OCM's cluster clientset (its
// ManagedCluster), the add-on clientset (its ManagedClusterAddOns) and a
// kubernetes.Interface (its CertificateSigningRequests, Leases and Events),
// as drop-ins for clientsets over a hub's kube-apiserver — informers and
// listers built on them work unmodified.
//
//	c, err := clients.New(&grpc.Config{ServerAddress: "hub:8090", TLS: ...}, "cluster1")
//	...
//	err = c.Start(ctx)
//	defer c.Close(ctx)
//	clusters := c.ClusterClient().ClusterV1().ManagedClusters() // get, list, watch, create, status update and patch
//	csrs := c.KubeClient().CertificatesV1().CertificateSigningRequests()
//
// Each type but Events is a mirror (resource.HolderBuilder.Mirror): the
// agent holds the hub's objects of its cluster as the hub's Service
// (registration/kubeservice) sends them, and a write is a request to that
// Service, whose refusal (a Conflict, a Forbidden) is the write's error and
// whose result reaches the agent's informers as the hub's next event.
// Events go one way: an agent creates them and updates their series, and
// the hub sends none down, so they are neither read nor watched.
//
// Everything else — every other resource and method of the clientsets
// (Apply, UpdateApproval, Pods), and the types the clients do not carry
// (WithTypes) — is refused here, before the wire, with the 405
// MethodNotAllowed a kube-apiserver gives a method it does not serve. No
// method returns nil.
package clients

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	addonclient "open-cluster-management.io/api/client/addon/clientset/versioned"
	clusterclient "open-cluster-management.io/api/client/cluster/clientset/versioned"
	clusterv1 "open-cluster-management.io/api/cluster/v1"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/registration/kubeservice"
	"github.com/workwire/sdk-go/resource"
)

// Types is a set of the types the clients carry.
type Types uint8

const (
	ManagedClusters Types = 1 << iota
	CertificateSigningRequests
	Leases
	Events
	AddOns
	// AddOnsV1beta1 are ManagedClusterAddOns of version v1beta1, which a
	// workwire hub serves beside v1alpha1 and OCM v1.2.0's does not.
	AddOnsV1beta1
	// TokenRequests are ServiceAccount token requests (CreateToken), with
	// which add-ons register by token.
	TokenRequests

	// Bootstrap is what an agent joining with a bootstrap identity may
	// use: it creates its ManagedCluster and a CSR, and watches both.
	Bootstrap = ManagedClusters | CertificateSigningRequests
	// All is what an agent with its own certificate uses, and every hub
	// serves: OCM's klusterlet's types. AddOnsV1beta1 and TokenRequests
	// are added to it by those who use them.
	All = ManagedClusters | CertificateSigningRequests | Leases | Events | AddOns
	// every is each type there is.
	every = All | AddOnsV1beta1 | TokenRequests
)

// Option configures Clients.
type Option func(*settings)

type settings struct {
	types     Types
	logger    logr.Logger
	loggerSet bool
	agentOpts []generic.AgentOption
}

// WithTypes sets the types the clients carry; each other type's methods
// are refused. Default: All.
func WithTypes(t Types) Option { return func(o *settings) { o.types = t } }

// WithLogger sets the logger of the clients and their transports.
// Default: the logger of the context given to Start.
func WithLogger(l logr.Logger) Option {
	return func(o *settings) { o.logger, o.loggerSet = l, true }
}

// WithAgentOptions adds options of every type's generic.AgentClient.
func WithAgentOptions(opts ...generic.AgentOption) Option {
	return func(o *settings) { o.agentOpts = append(o.agentOpts, opts...) }
}

// Clients are a cluster agent's clients of registration. Build them with
// New, Start them, Close them. They are goroutine-safe.
type Clients struct {
	cluster       string
	clusters      *resource.Holder[*clusterv1.ManagedCluster, *clusterv1.ManagedClusterList]
	csrs          *resource.Holder[*certificatesv1.CertificateSigningRequest, *certificatesv1.CertificateSigningRequestList]
	leases        *resource.Holder[*coordinationv1.Lease, *coordinationv1.LeaseList]
	addons        *resource.Holder[*addonv1alpha1.ManagedClusterAddOn, *addonv1alpha1.ManagedClusterAddOnList]
	addonsV1beta1 *resource.Holder[*addonv1beta1.ManagedClusterAddOn, *addonv1beta1.ManagedClusterAddOnList]
	tokens        *tokens
	events        *generic.AgentClient[*eventsv1.Event]
	parts         []part // what Start starts and Close closes, in that order

	clusterClient *clusterClientset
	addonClient   *addonClientset
	kubeClient    *kubeClientset
}

// part is one type's holder or client.
type part interface {
	Start(context.Context) error
	Close(context.Context) error
	Healthy() error
}

var (
	_ part = (*resource.Holder[*coordinationv1.Lease, *coordinationv1.LeaseList])(nil)
	_ part = (*generic.AgentClient[*eventsv1.Event])(nil)
)

// Scheme knows every type the clients carry.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clusterv1.Install, addonv1alpha1.Install, addonv1beta1.Install} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// New returns the clients of clusterName's agent over the gRPC broker
// config names (a *grpc.Config: its Services of registration/kubeservice
// answer). It does no network I/O.
func New(config options.TransportConfig, clusterName string, opts ...Option) (*Clients, error) {
	o := settings{types: All}
	for _, opt := range opts {
		opt(&o)
	}
	c, err := build(config, clusterName, o)
	if err != nil {
		return nil, fmt.Errorf("registration clients: %w", err)
	}
	return c, nil
}

func build(config options.TransportConfig, clusterName string, opts settings) (*Clients, error) {
	if clusterName == "" {
		return nil, errors.New("no cluster name")
	}
	if config == nil {
		return nil, errors.New("no transport config")
	}
	if opts.types == 0 || opts.types&^every != 0 {
		return nil, fmt.Errorf("types %#x: want a non-empty set of the types clients carry", uint8(opts.types))
	}
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	c := &Clients{cluster: clusterName}
	if opts.types&ManagedClusters != 0 {
		if c.clusters, err = mirror[*clusterv1.ManagedCluster, *clusterv1.ManagedClusterList](config, scheme, clusterName, kubeservice.ManagedClusterCodec, opts); err != nil {
			return nil, err
		}
		c.parts = append(c.parts, c.clusters)
	}
	if opts.types&CertificateSigningRequests != 0 {
		if c.csrs, err = mirror[*certificatesv1.CertificateSigningRequest, *certificatesv1.CertificateSigningRequestList](config, scheme, clusterName, kubeservice.CSRCodec, opts); err != nil {
			return nil, err
		}
		c.parts = append(c.parts, c.csrs)
	}
	if opts.types&Leases != 0 {
		if c.leases, err = mirror[*coordinationv1.Lease, *coordinationv1.LeaseList](config, scheme, clusterName, kubeservice.LeaseCodec, opts); err != nil {
			return nil, err
		}
		c.parts = append(c.parts, c.leases)
	}
	if opts.types&AddOns != 0 {
		if c.addons, err = mirror[*addonv1alpha1.ManagedClusterAddOn, *addonv1alpha1.ManagedClusterAddOnList](config, scheme, clusterName, kubeservice.AddOnCodec, opts); err != nil {
			return nil, err
		}
		c.parts = append(c.parts, c.addons)
	}
	if opts.types&AddOnsV1beta1 != 0 {
		if c.addonsV1beta1, err = mirror[*addonv1beta1.ManagedClusterAddOn, *addonv1beta1.ManagedClusterAddOnList](config, scheme, clusterName, kubeservice.AddOnV1beta1Codec, opts); err != nil {
			return nil, err
		}
		c.parts = append(c.parts, c.addonsV1beta1)
	}
	if opts.types&TokenRequests != 0 {
		if c.tokens, err = newTokens(config, clusterName, opts); err != nil {
			return nil, err
		}
		c.parts = append(c.parts, c.tokens)
	}
	if opts.types&Events != 0 {
		if c.events, err = eventClient(config, clusterName, opts); err != nil {
			return nil, err
		}
		c.parts = append(c.parts, c.events)
	}
	if err := c.buildClientsets(); err != nil {
		return nil, err
	}
	return c, nil
}

func mirror[T resource.Object, L runtime.Object](config options.TransportConfig, scheme *runtime.Scheme, cluster string, codec generic.Codec[T], opts settings) (*resource.Holder[T, L], error) {
	b := resource.NewHolderBuilder[T, L](config, scheme).WithClusterName(cluster).Mirror().
		WithCodecs(codec).WithAgentOptions(opts.agentOpts...)
	if opts.loggerSet {
		b = b.WithLogger(opts.logger)
	}
	return b.NewHolder()
}

// eventClient is the agent client Events go through: it publishes, and
// holds nothing (the hub sends no events down).
func eventClient(config options.TransportConfig, cluster string, opts settings) (*generic.AgentClient[*eventsv1.Event], error) {
	tr, err := config.NewTransport()
	if err != nil {
		return nil, err
	}
	agentOpts := opts.agentOpts
	if opts.loggerSet {
		agentOpts = append([]generic.AgentOption{generic.WithLogger(opts.logger)}, agentOpts...)
	}
	none := generic.ListerFunc[*eventsv1.Event](func(generic.ListOptions) ([]*eventsv1.Event, error) { return nil, nil })
	return generic.NewAgentClient(cluster, tr, none, func(*eventsv1.Event) (string, error) { return generic.NoStatus, nil },
		[]generic.Codec[*eventsv1.Event]{kubeservice.EventCodec}, agentOpts...)
}

// Start connects each type's client and waits until each holds what the
// hub sent (its informers synced), or ctx ends. On failure it closes what
// it started.
func (c *Clients) Start(ctx context.Context) error {
	for i, p := range c.parts {
		if err := p.Start(ctx); err != nil {
			// The part that failed too: it may have connected before its
			// informer failed to sync.
			closeErr := c.close(context.WithoutCancel(ctx), c.parts[:i+1])
			return errors.Join(fmt.Errorf("registration clients of %s: %w", c.cluster, err), closeErr)
		}
	}
	return nil
}

// Healthy returns nil while every type's client is started and connected,
// otherwise the first one's error (see resource.Holder.Healthy).
func (c *Clients) Healthy() error {
	for _, p := range c.parts {
		if err := p.Healthy(); err != nil {
			return err
		}
	}
	return nil
}

// Close stops every type's client and waits for their goroutines or ctx.
// It is idempotent.
func (c *Clients) Close(ctx context.Context) error { return c.close(ctx, c.parts) }

func (c *Clients) close(ctx context.Context, parts []part) error {
	var errs []error
	for _, p := range parts {
		errs = append(errs, p.Close(ctx))
	}
	return errors.Join(errs...)
}

// ClusterClient returns OCM's cluster clientset over events: ManagedClusters
// (the agent's own) get, list, watch, create, and status update and patch.
func (c *Clients) ClusterClient() clusterclient.Interface { return c.clusterClient }

// AddOnClient returns OCM's add-on clientset over events:
// ManagedClusterAddOns (v1alpha1, and v1beta1 with AddOnsV1beta1) of the
// agent's cluster — get, list, watch, and status update and patch.
func (c *Clients) AddOnClient() addonclient.Interface { return c.addonClient }

// KubeClient returns a kubernetes.Interface over events: CertificatesV1
// CertificateSigningRequests (create, get, list, watch), CoordinationV1
// Leases (get, list, watch, update), EventsV1 Events (create, update,
// patch) and, with TokenRequests, CoreV1 ServiceAccounts' CreateToken for
// the service accounts of the cluster's namespace on the hub.
func (c *Clients) KubeClient() kubernetes.Interface { return c.kubeClient }
