package clients

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	jsonpatch "github.com/evanphx/json-patch/v5"
	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubetypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes"
	certificatesv1client "k8s.io/client-go/kubernetes/typed/certificates/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	addonclient "open-cluster-management.io/api/client/addon/clientset/versioned"
	addonv1alpha1client "open-cluster-management.io/api/client/addon/clientset/versioned/typed/addon/v1alpha1"
	addonv1beta1client "open-cluster-management.io/api/client/addon/clientset/versioned/typed/addon/v1beta1"
	clusterclient "open-cluster-management.io/api/client/cluster/clientset/versioned"
	clusterv1client "open-cluster-management.io/api/client/cluster/clientset/versioned/typed/cluster/v1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"

	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/internal/unsupported"
	"github.com/workwire/sdk-go/resource"
)

// Each clientset is client-go's generated one over the in-process
// transport of internal/unsupported, which refuses everything with 405,
// with the group clients of the served types replaced: a served typed
// client is the holder's (resource.Client), with the generated one beneath
// it for the methods it has beside (Apply, UpdateApproval), so those are
// refused too.

var mirrorVerbs = metav1.Verbs{"create", "get", "list", "patch", "update", "watch"}

func (c *Clients) buildClientsets() error {
	served := unsupported.Served{}
	if c.clusters != nil {
		served[clusterv1.GroupVersion.String()] = []metav1.APIResource{
			{Name: "managedclusters", SingularName: "managedcluster", Kind: "ManagedCluster", Verbs: mirrorVerbs},
			{Name: "managedclusters/status", Kind: "ManagedCluster", Verbs: metav1.Verbs{"get", "patch", "update"}},
		}
	}
	if c.addons != nil {
		served[addonv1alpha1.GroupVersion.String()] = []metav1.APIResource{
			{Name: "managedclusteraddons", SingularName: "managedclusteraddon", Namespaced: true, Kind: "ManagedClusterAddOn", Verbs: mirrorVerbs},
			{Name: "managedclusteraddons/status", Namespaced: true, Kind: "ManagedClusterAddOn", Verbs: metav1.Verbs{"get", "patch", "update"}},
		}
	}
	if c.addonsV1beta1 != nil {
		served[addonv1beta1.GroupVersion.String()] = []metav1.APIResource{
			{Name: "managedclusteraddons", SingularName: "managedclusteraddon", Namespaced: true, Kind: "ManagedClusterAddOn", Verbs: mirrorVerbs},
			{Name: "managedclusteraddons/status", Namespaced: true, Kind: "ManagedClusterAddOn", Verbs: metav1.Verbs{"get", "patch", "update"}},
		}
	}
	if c.csrs != nil {
		served[certificatesv1.SchemeGroupVersion.String()] = []metav1.APIResource{
			{Name: "certificatesigningrequests", SingularName: "certificatesigningrequest", Kind: "CertificateSigningRequest", Verbs: mirrorVerbs},
		}
	}
	if c.leases != nil {
		served[coordinationv1.SchemeGroupVersion.String()] = []metav1.APIResource{
			{Name: "leases", SingularName: "lease", Namespaced: true, Kind: "Lease", Verbs: mirrorVerbs},
		}
	}
	if c.events != nil {
		served[eventsv1.SchemeGroupVersion.String()] = []metav1.APIResource{
			{Name: "events", SingularName: "event", Namespaced: true, Kind: "Event", Verbs: metav1.Verbs{"create", "patch", "update"}},
		}
	}
	cfg := unsupported.Config(fmt.Sprintf("the event-based registration clients of cluster %s", c.cluster), served)
	cluster, err := clusterclient.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("cluster clientset: %w", err)
	}
	addon, err := addonclient.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("add-on clientset: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kubernetes clientset: %w", err)
	}
	c.clusterClient = &clusterClientset{Clientset: cluster, c: c}
	c.addonClient = &addonClientset{Clientset: addon, c: c}
	c.kubeClient = &kubeClientset{Clientset: kube, c: c}
	return nil
}

// clusterClientset is OCM's cluster clientset with ManagedClusters served.
type clusterClientset struct {
	*clusterclient.Clientset
	c *Clients
}

func (s *clusterClientset) ClusterV1() clusterv1client.ClusterV1Interface {
	return clusterV1{ClusterV1Interface: s.Clientset.ClusterV1(), c: s.c}
}

type clusterV1 struct {
	clusterv1client.ClusterV1Interface
	c *Clients
}

func (v clusterV1) ManagedClusters() clusterv1client.ManagedClusterInterface {
	if v.c.clusters == nil {
		return v.ClusterV1Interface.ManagedClusters()
	}
	return v.c.clusters.Resources(metav1.NamespaceNone)
}

// addonClientset is OCM's add-on clientset with v1alpha1
// ManagedClusterAddOns served.
type addonClientset struct {
	*addonclient.Clientset
	c *Clients
}

func (s *addonClientset) AddonV1alpha1() addonv1alpha1client.AddonV1alpha1Interface {
	return addonV1alpha1{AddonV1alpha1Interface: s.Clientset.AddonV1alpha1(), c: s.c}
}

func (s *addonClientset) AddonV1beta1() addonv1beta1client.AddonV1beta1Interface {
	return addonV1beta1{AddonV1beta1Interface: s.Clientset.AddonV1beta1(), c: s.c}
}

type addonV1beta1 struct {
	addonv1beta1client.AddonV1beta1Interface
	c *Clients
}

func (v addonV1beta1) ManagedClusterAddOns(namespace string) addonv1beta1client.ManagedClusterAddOnInterface {
	if v.c.addonsV1beta1 == nil {
		return v.AddonV1beta1Interface.ManagedClusterAddOns(namespace)
	}
	return v.c.addonsV1beta1.Resources(namespace)
}

type addonV1alpha1 struct {
	addonv1alpha1client.AddonV1alpha1Interface
	c *Clients
}

func (v addonV1alpha1) ManagedClusterAddOns(namespace string) addonv1alpha1client.ManagedClusterAddOnInterface {
	if v.c.addons == nil {
		return v.AddonV1alpha1Interface.ManagedClusterAddOns(namespace)
	}
	return v.c.addons.Resources(namespace)
}

// kubeClientset is client-go's clientset with CSRs, Leases and Events
// served.
type kubeClientset struct {
	*kubernetes.Clientset
	c *Clients
}

func (s *kubeClientset) CoreV1() corev1client.CoreV1Interface {
	return coreV1{CoreV1Interface: s.Clientset.CoreV1(), c: s.c}
}

func (s *kubeClientset) CertificatesV1() certificatesv1client.CertificatesV1Interface {
	return certificatesV1{CertificatesV1Interface: s.Clientset.CertificatesV1(), c: s.c}
}

func (s *kubeClientset) CoordinationV1() coordinationv1client.CoordinationV1Interface {
	return coordinationV1{CoordinationV1Interface: s.Clientset.CoordinationV1(), c: s.c}
}

func (s *kubeClientset) EventsV1() eventsv1client.EventsV1Interface {
	return eventsV1{EventsV1Interface: s.Clientset.EventsV1(), c: s.c}
}

type coreV1 struct {
	corev1client.CoreV1Interface
	c *Clients
}

func (v coreV1) ServiceAccounts(namespace string) corev1client.ServiceAccountInterface {
	refused := v.CoreV1Interface.ServiceAccounts(namespace)
	if v.c.tokens == nil {
		return refused
	}
	return serviceAccounts{ServiceAccountInterface: refused, tokens: v.c.tokens, namespace: namespace}
}

// serviceAccounts serves CreateToken alone, as a request to the hub; every
// other method is refused.
type serviceAccounts struct {
	corev1client.ServiceAccountInterface
	tokens    *tokens
	namespace string
}

func (s serviceAccounts) CreateToken(ctx context.Context, name string, req *authenticationv1.TokenRequest, opts metav1.CreateOptions) (*authenticationv1.TokenRequest, error) {
	return s.tokens.create(ctx, s.namespace, name, req, opts)
}

type certificatesV1 struct {
	certificatesv1client.CertificatesV1Interface
	c *Clients
}

func (v certificatesV1) CertificateSigningRequests() certificatesv1client.CertificateSigningRequestInterface {
	refused := v.CertificatesV1Interface.CertificateSigningRequests()
	if v.c.csrs == nil {
		return refused
	}
	return csrs{Client: v.c.csrs.Resources(metav1.NamespaceNone), refusedCSRs: refusedCSRs{refused}}
}

// csrs serves the holder's methods; the generated client beneath, one
// level deeper, refuses Apply, ApplyStatus and UpdateApproval.
type csrs struct {
	resource.Client[*certificatesv1.CertificateSigningRequest, *certificatesv1.CertificateSigningRequestList]
	refusedCSRs
}

type refusedCSRs struct {
	certificatesv1client.CertificateSigningRequestInterface
}

type coordinationV1 struct {
	coordinationv1client.CoordinationV1Interface
	c *Clients
}

func (v coordinationV1) Leases(namespace string) coordinationv1client.LeaseInterface {
	refused := v.CoordinationV1Interface.Leases(namespace)
	if v.c.leases == nil {
		return refused
	}
	return leases{Client: v.c.leases.Resources(namespace), refusedLeases: refusedLeases{refused}}
}

type leases struct {
	resource.Client[*coordinationv1.Lease, *coordinationv1.LeaseList]
	refusedLeases
}

type refusedLeases struct {
	coordinationv1client.LeaseInterface
}

type eventsV1 struct {
	eventsv1client.EventsV1Interface
	c *Clients
}

func (v eventsV1) Events(namespace string) eventsv1client.EventInterface {
	refused := v.EventsV1Interface.Events(namespace)
	if v.c.events == nil {
		return refused
	}
	return events{EventInterface: refused, c: v.c, namespace: namespace}
}

// events sends an agent's events to the hub: Create and Update as the
// Service's create and update requests, Patch (a series, as client-go's
// event recorder sends it) as an update of the event it names. The hub
// keeps events and sends none down: reading them is refused.
type events struct {
	eventsv1client.EventInterface
	c         *Clients
	namespace string
}

var eventResource = schema.GroupResource{Group: eventsv1.GroupName, Resource: "events"}

func (e events) Create(ctx context.Context, event *eventsv1.Event, opts metav1.CreateOptions) (*eventsv1.Event, error) {
	return e.send(ctx, types.CreateRequest, event, opts.DryRun)
}

func (e events) Update(ctx context.Context, event *eventsv1.Event, opts metav1.UpdateOptions) (*eventsv1.Event, error) {
	return e.send(ctx, types.UpdateRequest, event, opts.DryRun)
}

func (e events) Patch(ctx context.Context, name string, pt kubetypes.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*eventsv1.Event, error) {
	if len(subresources) > 0 {
		return nil, apierrors.NewMethodNotSupported(eventResource, "patch of a subresource")
	}
	base, err := json.Marshal(&eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.namespace}})
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	var patched []byte
	switch pt {
	case kubetypes.StrategicMergePatchType:
		patched, err = strategicpatch.StrategicMergePatch(base, data, eventsv1.Event{})
	case kubetypes.MergePatchType:
		patched, err = jsonpatch.MergePatch(base, data)
	default:
		return nil, apierrors.NewGenericServerResponse(415, "patch", eventResource, name,
			fmt.Sprintf("patch type %s: an event is patched by a strategic or JSON merge patch of its series", pt), 0, false)
	}
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("patch of event %s: %v", name, err))
	}
	event := &eventsv1.Event{}
	if err := json.Unmarshal(patched, event); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("patch of event %s: %v", name, err))
	}
	event.Name, event.Namespace = name, e.namespace
	return e.send(ctx, types.UpdateRequest, event, opts.DryRun)
}

func (e events) send(ctx context.Context, action types.Action, event *eventsv1.Event, dryRun []string) (*eventsv1.Event, error) {
	if event.Namespace != "" && event.Namespace != e.namespace {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the namespace of the object (%s) does not match the namespace on the request (%s)", event.Namespace, e.namespace))
	}
	out := event.DeepCopy()
	out.Namespace = e.namespace
	if len(dryRun) > 0 {
		return out, nil
	}
	if err := e.c.events.Publish(ctx, types.EventType{SubResource: types.SubResourceSpec, Action: action}, out); err != nil {
		var se *apierrors.StatusError
		if errors.As(err, &se) {
			return nil, se
		}
		return nil, apierrors.NewServiceUnavailable(err.Error())
	}
	return out, nil
}
