package work

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"open-cluster-management.io/api/client/work/clientset/versioned"
	workv1client "open-cluster-management.io/api/client/work/clientset/versioned/typed/work/v1"
	workv1alpha1client "open-cluster-management.io/api/client/work/clientset/versioned/typed/work/v1alpha1"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/internal/engine"
)

// clientset is the versioned.Interface the holder hands out: the engine's
// typed client of ManifestWorks, and the unsupported rest.
type clientset struct {
	events      *engine.Events[*workv1.ManifestWork]
	unsupported *unsupportedClients
	// isStored makes List and Watch hand out the store's objects: set only
	// on the clientset of the holder's own informer factory.
	isStored bool
}

var _ versioned.Interface = (*clientset)(nil)

// stored is c for the holder's informer factory (see
// engine.Events.StoredClient).
func (c *clientset) stored() *clientset {
	s := *c
	s.isStored = true
	return &s
}

func (c *clientset) Discovery() discovery.DiscoveryInterface { return c.unsupported.discovery }

func (c *clientset) WorkV1() workv1client.WorkV1Interface { return workV1{c} }

func (c *clientset) WorkV1alpha1() workv1alpha1client.WorkV1alpha1Interface {
	return c.unsupported.v1alpha1
}

type workV1 struct{ c *clientset }

func (v workV1) RESTClient() rest.Interface { return v.c.unsupported.v1.RESTClient() }

func (v workV1) AppliedManifestWorks() workv1client.AppliedManifestWorkInterface {
	return v.c.unsupported.v1.AppliedManifestWorks()
}

// ManifestWorks returns a fresh client per call, bound to namespace.
func (v workV1) ManifestWorks(namespace string) workv1client.ManifestWorkInterface {
	if v.c.isStored {
		return manifestWorks{v.c.events.StoredClient(namespace)}
	}
	return manifestWorks{v.c.events.Client(namespace)}
}

// manifestWorks is the typed ManifestWork client: the engine's, with
// ManifestWorkList for lists.
type manifestWorks struct {
	*engine.Namespaced[*workv1.ManifestWork]
}

var _ workv1client.ManifestWorkInterface = manifestWorks{}

func (m manifestWorks) List(ctx context.Context, opts metav1.ListOptions) (*workv1.ManifestWorkList, error) {
	l, err := m.Namespaced.List(ctx, opts)
	if err != nil {
		return nil, err
	}
	list := &workv1.ManifestWorkList{
		TypeMeta: metav1.TypeMeta{Kind: "ManifestWorkList", APIVersion: workv1.GroupVersion.String()},
		ListMeta: l.ListMeta,
		Items:    make([]workv1.ManifestWork, len(l.Items)),
	}
	for i, w := range l.Items {
		list.Items[i] = *w
	}
	return list, nil
}
