package work

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	workv1client "open-cluster-management.io/api/client/work/clientset/versioned/typed/work/v1"
	workv1alpha1client "open-cluster-management.io/api/client/work/clientset/versioned/typed/work/v1alpha1"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/internal/unsupported"
)

// served is what discovery lists: manifestworks and manifestworks/status.
var served = unsupported.Served{workv1.GroupVersion.String(): {
	{Name: "manifestworks", SingularName: "manifestwork", Namespaced: true, Kind: "ManifestWork",
		Verbs: metav1.Verbs{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}},
	{Name: "manifestworks/status", Namespaced: true, Kind: "ManifestWork", Verbs: metav1.Verbs{"get", "patch", "update"}},
}}

// unsupportedClients are the generated clients for everything the
// clientset does not serve itself — AppliedManifestWorks,
// ManifestWorkReplicaSets, raw REST requests — refused in-process with
// MethodNotAllowed (see internal/unsupported).
type unsupportedClients struct {
	discovery discovery.DiscoveryInterface
	v1        *workv1client.WorkV1Client
	v1alpha1  *workv1alpha1client.WorkV1alpha1Client
}

func newUnsupportedClients() (*unsupportedClients, error) {
	cfg := unsupported.Config("the event-based work client: it serves ManifestWorks only", served)
	d, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	v1, err := workv1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("work/v1 client: %w", err)
	}
	v1alpha1, err := workv1alpha1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("work/v1alpha1 client: %w", err)
	}
	return &unsupportedClients{discovery: d, v1: v1, v1alpha1: v1alpha1}, nil
}
