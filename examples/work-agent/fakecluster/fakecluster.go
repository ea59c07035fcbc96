// Package fakecluster is an in-memory stand-in for a managed cluster, for
// running the work agent without one: a k8s.io/client-go/dynamic/fake
// client, a RESTMapper that knows the common built-in kinds, and the little
// an API server and a Deployment controller would do, so that status
// feedback has values to report.
//
// What it does on top of the fake client, synchronously, inside each call:
//
//   - like an API server: sets uid, creationTimestamp, resourceVersion and
//     generation on create, and bumps resourceVersion (and generation, when
//     the spec changes) on update; an update keeps the status it had, as
//     the status subresource does;
//   - like a Deployment controller that rolls out at once: sets a
//     Deployment's status.observedGeneration, replicas, updatedReplicas,
//     readyReplicas and availableReplicas to spec.replicas (default 1), with
//     Available and Progressing conditions True.
//
// Server-side apply is not supported (the fake client's apply is a
// strategic-merge stand-in): use the default Update strategy.
package fakecluster

import (
	"strconv"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
)

// Cluster is an in-memory cluster. Its client is goroutine-safe.
type Cluster struct {
	// Client is the dynamic client; its Tracker holds the objects and its
	// Actions record the calls, for tests.
	Client *fake.FakeDynamicClient
	// Mapper maps the kinds the cluster knows to their resources.
	Mapper meta.RESTMapper

	resourceVersion atomic.Int64
}

// kind is a built-in kind the cluster knows.
type kind struct {
	gvk        schema.GroupVersionKind
	resource   string
	namespaced bool
}

var kinds = []kind{
	{schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, "namespaces", false},
	{schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, "configmaps", true},
	{schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, "secrets", true},
	{schema.GroupVersionKind{Version: "v1", Kind: "Service"}, "services", true},
	{schema.GroupVersionKind{Version: "v1", Kind: "ServiceAccount"}, "serviceaccounts", true},
	{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, "deployments", true},
	{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSet"}, "statefulsets", true},
	{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DaemonSet"}, "daemonsets", true},
	{schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}, "jobs", true},
	{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"}, "roles", true},
	{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"}, "rolebindings", true},
	{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, "clusterroles", false},
	{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"}, "clusterrolebindings", false},
}

// DeploymentsResource is the resource of Deployments.
var DeploymentsResource = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

// New returns an empty cluster.
func New() *Cluster {
	mapper := meta.NewDefaultRESTMapper(nil)
	listKinds := map[schema.GroupVersionResource]string{}
	for _, k := range kinds {
		scope := meta.RESTScopeRoot
		if k.namespaced {
			scope = meta.RESTScopeNamespace
		}
		gvr := k.gvk.GroupVersion().WithResource(k.resource)
		mapper.AddSpecific(k.gvk, gvr, k.gvk.GroupVersion().WithResource(k.resource[:len(k.resource)-1]), scope)
		listKinds[gvr] = k.gvk.Kind + "List"
	}
	c := &Cluster{
		Client: fake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds),
		Mapper: mapper,
	}
	c.Client.PrependReactor("create", "*", c.onCreate)
	c.Client.PrependReactor("update", "*", c.onUpdate)
	return c
}

// onCreate plays the API server on a create, then lets the tracker store
// the object.
func (c *Cluster) onCreate(action clienttesting.Action) (bool, runtime.Object, error) {
	a, ok := action.(clienttesting.CreateAction)
	if !ok || a.GetSubresource() != "" {
		return false, nil, nil
	}
	obj, ok := a.GetObject().(*unstructured.Unstructured)
	if !ok {
		return false, nil, nil
	}
	obj.SetUID(uuid.NewUUID())
	obj.SetCreationTimestamp(metav1.Now())
	obj.SetResourceVersion(c.nextResourceVersion())
	obj.SetGeneration(1)
	delete(obj.Object, "status")
	if a.GetResource() == DeploymentsResource {
		rollOut(obj)
	}
	return false, nil, nil // the tracker stores it
}

// onUpdate plays the API server on an update, then lets the tracker store
// the object.
func (c *Cluster) onUpdate(action clienttesting.Action) (bool, runtime.Object, error) {
	a, ok := action.(clienttesting.UpdateAction)
	if !ok || a.GetSubresource() != "" {
		return false, nil, nil
	}
	obj, ok := a.GetObject().(*unstructured.Unstructured)
	if !ok {
		return false, nil, nil
	}
	cur, err := c.Client.Tracker().Get(a.GetResource(), a.GetNamespace(), obj.GetName())
	if err != nil {
		return false, nil, nil // the tracker answers NotFound
	}
	old := cur.(*unstructured.Unstructured)
	obj.SetUID(old.GetUID())
	obj.SetCreationTimestamp(old.GetCreationTimestamp())
	obj.SetResourceVersion(c.nextResourceVersion())
	obj.SetGeneration(old.GetGeneration())
	if !equality.Semantic.DeepEqual(obj.Object["spec"], old.Object["spec"]) {
		obj.SetGeneration(old.GetGeneration() + 1)
	}
	if status, ok := old.Object["status"]; ok {
		obj.Object["status"] = runtime.DeepCopyJSONValue(status)
	} else {
		delete(obj.Object, "status")
	}
	if a.GetResource() == DeploymentsResource {
		rollOut(obj)
	}
	return false, nil, nil
}

func (c *Cluster) nextResourceVersion() string {
	return strconv.FormatInt(c.resourceVersion.Add(1), 10)
}

// rollOut is a Deployment controller that finishes every rollout at once.
func rollOut(d *unstructured.Unstructured) {
	replicas, found, _ := unstructured.NestedInt64(d.Object, "spec", "replicas")
	if !found {
		replicas = 1
	}
	now := metav1.Now().UTC().Format("2006-01-02T15:04:05Z")
	condition := func(typ, reason, message string) any {
		return map[string]any{
			"type": typ, "status": "True", "reason": reason, "message": message,
			"lastUpdateTime": now, "lastTransitionTime": now,
		}
	}
	d.Object["status"] = map[string]any{
		"observedGeneration": d.GetGeneration(),
		"replicas":           replicas,
		"updatedReplicas":    replicas,
		"readyReplicas":      replicas,
		"availableReplicas":  replicas,
		"conditions": []any{
			condition("Available", "MinimumReplicasAvailable", "Deployment has minimum availability."),
			condition("Progressing", "NewReplicaSetAvailable", "ReplicaSet has successfully progressed."),
		},
	}
}
