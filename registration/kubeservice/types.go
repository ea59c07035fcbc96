package kubeservice

import (
	"context"
	"fmt"

	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	certinformers "k8s.io/client-go/informers/certificates/v1"
	coordinationinformers "k8s.io/client-go/informers/coordination/v1"
	"k8s.io/client-go/kubernetes"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	addonv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	addonclient "open-cluster-management.io/api/client/addon/clientset/versioned"
	addoninformers "open-cluster-management.io/api/client/addon/informers/externalversions/addon/v1alpha1"
	clusterclient "open-cluster-management.io/api/client/cluster/clientset/versioned"
	clusterinformers "open-cluster-management.io/api/client/cluster/informers/externalversions/cluster/v1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options/grpc/server"
)

// Labels and annotations of OCM's registration.
const (
	// ClusterNameLabel names the cluster a CSR is for.
	ClusterNameLabel = clusterv1.ClusterNameLabelKey
	// ClusterSetLabel puts a cluster in a cluster set; the hub sets it,
	// never the agent.
	ClusterSetLabel = "cluster.open-cluster-management.io/clusterset"
)

// The codecs of the types registration carries, with OCM's data types.
var (
	ManagedClusterCodec = mustCodec(schema.GroupVersionKind{Group: clusterv1.GroupName, Version: "v1", Kind: "ManagedCluster"}, "managedclusters",
		func(c *clusterv1.ManagedCluster) string { return c.Name })
	CSRCodec = mustCodec(certificatesv1.SchemeGroupVersion.WithKind("CertificateSigningRequest"), "certificatesigningrequests",
		func(c *certificatesv1.CertificateSigningRequest) string { return c.Labels[ClusterNameLabel] })
	LeaseCodec = mustCodec(coordinationv1.SchemeGroupVersion.WithKind("Lease"), "leases",
		func(l *coordinationv1.Lease) string { return l.Namespace })
	EventCodec = mustCodec(eventsv1.SchemeGroupVersion.WithKind("Event"), "events",
		func(e *eventsv1.Event) string { return e.Namespace })
	AddOnCodec = mustCodec(schema.GroupVersionKind{Group: addonv1alpha1.GroupName, Version: "v1alpha1", Kind: "ManagedClusterAddOn"}, "managedclusteraddons",
		func(a *addonv1alpha1.ManagedClusterAddOn) string { return a.Namespace })
	AddOnV1beta1Codec = mustCodec(schema.GroupVersionKind{Group: addonv1beta1.GroupName, Version: "v1beta1", Kind: "ManagedClusterAddOn"}, "managedclusteraddons",
		func(a *addonv1beta1.ManagedClusterAddOn) string { return a.Namespace })
)

func mustCodec[T codec.Object](gvk schema.GroupVersionKind, resource string, clusterOf func(T) string) *codec.KubeCodec[T] {
	c, err := codec.NewKubeCodec(gvk, resource, clusterOf)
	if err != nil {
		panic(err)
	}
	return c
}

// notAllowed is the error of a request the type's policy does not allow.
func notAllowed(dt types.DataType, t types.EventType) error {
	return apierrors.NewMethodNotSupported(schema.GroupResource{Group: dt.Group, Resource: dt.Resource}, fmt.Sprintf("%s.%s from an agent", t.SubResource, t.Action))
}

// NewManagedClusters returns the Service of ManagedClusters. An agent may
// create its cluster (spec create_request; the hub decides its cluster
// set, whether it accepts the cluster and its taints, so what the agent
// says of them is dropped) and update its status;
// nothing else, so it never changes what the hub decides (whether the hub
// accepts it, its taints).
func NewManagedClusters(client clusterclient.Interface, informer clusterinformers.ManagedClusterInformer, sourceID string, opts ...Option) (*Service[*clusterv1.ManagedCluster], error) {
	if client == nil || informer == nil {
		return nil, fmt.Errorf("new managed cluster service: client and informer are required")
	}
	clusters := client.ClusterV1().ManagedClusters()
	return newService(ManagedClusterCodec, sourceID, informer.Informer(), func(ctx context.Context, _ server.Identity, t types.EventType, c *clusterv1.ManagedCluster) error {
		switch {
		case t.SubResource == types.SubResourceSpec && t.Action == types.CreateRequest:
			create := &clusterv1.ManagedCluster{ObjectMeta: creatable(c.ObjectMeta), Spec: c.Spec}
			delete(create.Labels, ClusterSetLabel)
			create.Spec.HubAcceptsClient, create.Spec.Taints = false, nil // the hub's to decide
			_, err := clusters.Create(ctx, create, metav1.CreateOptions{})
			return err
		case t.SubResource == types.SubResourceStatus && t.Action == types.UpdateRequest:
			_, err := clusters.UpdateStatus(ctx, c, metav1.UpdateOptions{})
			return err
		}
		return notAllowed(ManagedClusterCodec.DataType(), t)
	}, opts)
}

// creatable is what an agent's object keeps for a create: its name, labels
// and annotations; what the kube-apiserver assigns it assigns anew.
func creatable(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, GenerateName: m.GenerateName, Namespace: m.Namespace, Labels: m.Labels, Annotations: m.Annotations}
}

// NewLeases returns the Service of Leases. An agent may renew the leases of
// its cluster's namespace (spec update_request, with the resourceVersion
// it read: a stale one is a Conflict), nothing else.
func NewLeases(client kubernetes.Interface, informer coordinationinformers.LeaseInformer, sourceID string, opts ...Option) (*Service[*coordinationv1.Lease], error) {
	if client == nil || informer == nil {
		return nil, fmt.Errorf("new lease service: client and informer are required")
	}
	return newService(LeaseCodec, sourceID, informer.Informer(), func(ctx context.Context, _ server.Identity, t types.EventType, l *coordinationv1.Lease) error {
		if t.SubResource != types.SubResourceSpec || t.Action != types.UpdateRequest {
			return notAllowed(LeaseCodec.DataType(), t)
		}
		_, err := client.CoordinationV1().Leases(l.Namespace).Update(ctx, l, metav1.UpdateOptions{})
		return err
	}, opts)
}

// NewEvents returns the Service of Events (events.k8s.io/v1). An agent may
// create events in its cluster's namespace and update a series of one
// (OCM's agents send the series alone); the hub sends none down.
func NewEvents(client kubernetes.Interface, sourceID string, opts ...Option) (*Service[*eventsv1.Event], error) {
	if client == nil {
		return nil, fmt.Errorf("new event service: client is required")
	}
	return newService(EventCodec, sourceID, nil, func(ctx context.Context, _ server.Identity, t types.EventType, e *eventsv1.Event) error {
		events := client.EventsV1().Events(e.Namespace)
		switch {
		case t.SubResource == types.SubResourceSpec && t.Action == types.CreateRequest:
			create := e.DeepCopy()
			create.ObjectMeta = creatable(e.ObjectMeta)
			_, err := events.Create(ctx, create, metav1.CreateOptions{})
			return err
		case t.SubResource == types.SubResourceSpec && t.Action == types.UpdateRequest:
			cur, err := events.Get(ctx, e.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil // a series of an event that expired: nothing to count on
			}
			if err != nil {
				return err
			}
			cur.Series = e.Series
			_, err = events.Update(ctx, cur, metav1.UpdateOptions{})
			return err
		}
		return notAllowed(EventCodec.DataType(), t)
	}, opts)
}

// NewAddOns returns the Service of ManagedClusterAddOns. An agent may
// update the status of its cluster's add-ons, nothing else.
func NewAddOns(client addonclient.Interface, informer addoninformers.ManagedClusterAddOnInformer, sourceID string, opts ...Option) (*Service[*addonv1alpha1.ManagedClusterAddOn], error) {
	if client == nil || informer == nil {
		return nil, fmt.Errorf("new add-on service: client and informer are required")
	}
	return newService(AddOnCodec, sourceID, informer.Informer(), func(ctx context.Context, _ server.Identity, t types.EventType, a *addonv1alpha1.ManagedClusterAddOn) error {
		if t.SubResource != types.SubResourceStatus || t.Action != types.UpdateRequest {
			return notAllowed(AddOnCodec.DataType(), t)
		}
		_, err := client.AddonV1alpha1().ManagedClusterAddOns(a.Namespace).UpdateStatus(ctx, a, metav1.UpdateOptions{})
		return err
	}, opts)
}

// NewAddOnsV1beta1 returns the Service of ManagedClusterAddOns of version
// v1beta1, beside NewAddOns' v1alpha1, from the same v1alpha1 informer: it
// converts each add-on itself (with the API module's conversions, as OCM's
// webhook does), so a hub serves v1beta1 correctly over the add-on CRD
// whichever version it stores and whether or not a conversion webhook
// serves it. An agent may update the status of its cluster's add-ons,
// nothing else; the status is written as v1alpha1.
func NewAddOnsV1beta1(client addonclient.Interface, informer addoninformers.ManagedClusterAddOnInformer, sourceID string, opts ...Option) (*Service[*addonv1beta1.ManagedClusterAddOn], error) {
	if client == nil || informer == nil {
		return nil, fmt.Errorf("new add-on service (v1beta1): client and informer are required")
	}
	return newConvertingService(AddOnV1beta1Codec, sourceID, informer.Informer(), addOnV1beta1Of, func(ctx context.Context, _ server.Identity, t types.EventType, a *addonv1beta1.ManagedClusterAddOn) error {
		if t.SubResource != types.SubResourceStatus || t.Action != types.UpdateRequest {
			return notAllowed(AddOnV1beta1Codec.DataType(), t)
		}
		var alpha addonv1alpha1.ManagedClusterAddOn
		if err := addonv1beta1.Convert_v1beta1_ManagedClusterAddOn_To_v1alpha1_ManagedClusterAddOn(a, &alpha, nil); err != nil {
			return apierrors.NewBadRequest(fmt.Sprintf("add-on %s/%s as v1alpha1: %v", a.Namespace, a.Name, err))
		}
		alpha.APIVersion = addonv1alpha1.GroupVersion.String()
		_, err := client.AddonV1alpha1().ManagedClusterAddOns(a.Namespace).UpdateStatus(ctx, &alpha, metav1.UpdateOptions{})
		return err
	}, opts)
}

// addOnV1beta1Of is a v1alpha1 add-on of the informer as v1beta1.
func addOnV1beta1Of(obj any) (*addonv1beta1.ManagedClusterAddOn, bool) {
	alpha, ok := obj.(*addonv1alpha1.ManagedClusterAddOn)
	if !ok {
		return nil, false
	}
	beta := &addonv1beta1.ManagedClusterAddOn{}
	if err := addonv1beta1.Convert_v1alpha1_ManagedClusterAddOn_To_v1beta1_ManagedClusterAddOn(alpha, beta, nil); err != nil {
		return nil, false
	}
	beta.APIVersion, beta.Kind = addonv1beta1.GroupVersion.String(), "ManagedClusterAddOn"
	return beta, true
}

// NewCSRs returns the Service of CertificateSigningRequests: see csr.go.
func NewCSRs(client kubernetes.Interface, informer certinformers.CertificateSigningRequestInformer, sourceID string, opts ...Option) (*Service[*certificatesv1.CertificateSigningRequest], error) {
	if client == nil || informer == nil {
		return nil, fmt.Errorf("new CSR service: client and informer are required")
	}
	return newService(CSRCodec, sourceID, informer.Informer(), func(ctx context.Context, id server.Identity, t types.EventType, csr *certificatesv1.CertificateSigningRequest) error {
		if t.SubResource != types.SubResourceSpec || t.Action != types.CreateRequest {
			return notAllowed(CSRCodec.DataType(), t)
		}
		create, err := csrToCreate(csr, id)
		if err != nil {
			return err
		}
		_, err = client.CertificatesV1().CertificateSigningRequests().Create(ctx, create, metav1.CreateOptions{})
		return err
	}, opts)
}
