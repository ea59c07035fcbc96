package hub

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	workv1 "open-cluster-management.io/api/work/v1"
)

const (
	// ManagedByLabel marks the works this controller owns; it leaves every
	// other work alone.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// ManagedBy is the value of ManagedByLabel on its works.
	ManagedBy = "workwire-hub-controller"
	// SpecHashAnnotation holds a hash of the spec the controller wants. The
	// controller compares hashes, not specs, so that defaults a
	// kube-apiserver fills in never look like a difference.
	SpecHashAnnotation = "workwire.io/spec-hash"
)

// Names of the status feedback values each work asks for: the
// WellKnownStatus values of a Deployment and two JSON paths under .status.
const (
	FeedbackReplicas           = "replicas"          // WellKnownStatus
	FeedbackReadyReplicas      = "readyReplicas"     // WellKnownStatus
	FeedbackAvailableReplicas  = "availableReplicas" // WellKnownStatus
	FeedbackReady              = "ready"             // JSONPaths: .readyReplicas
	FeedbackAvailableCondition = "availableCondition"
)

// NewWork returns the work the controller wants: one nginx Deployment
// named name in namespace, with replicas replicas, and status feedback
// rules that bring its replica counts and its Available condition back.
func NewWork(cluster, name, namespace, image string, replicas int64) *workv1.ManifestWork {
	labels := map[string]string{"app": name}
	deployment := map[string]any{
		"apiVersion": "apps/v1",
		"kind":       "Deployment",
		"metadata":   map[string]any{"name": name, "namespace": namespace, "labels": labels},
		"spec": map[string]any{
			"replicas": replicas,
			"selector": map[string]any{"matchLabels": labels},
			"template": map[string]any{
				"metadata": map[string]any{"labels": labels},
				"spec": map[string]any{"containers": []any{map[string]any{
					"name":  "nginx",
					"image": image,
					"ports": []any{map[string]any{"containerPort": 80}},
					"resources": map[string]any{
						"requests": map[string]any{"cpu": "10m", "memory": "16Mi"},
						"limits":   map[string]any{"cpu": "100m", "memory": "64Mi"},
					},
				}}},
			},
		},
	}
	raw, err := json.Marshal(deployment)
	if err != nil {
		panic(err) // maps of strings and numbers always marshal
	}
	w := &workv1.ManifestWork{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: cluster,
			Labels:    map[string]string{ManagedByLabel: ManagedBy, "app": name},
		},
		Spec: workv1.ManifestWorkSpec{
			Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{{RawExtension: runtime.RawExtension{Raw: raw}}}},
			ManifestConfigs: []workv1.ManifestConfigOption{{
				ResourceIdentifier: workv1.ResourceIdentifier{Group: "apps", Resource: "deployments", Name: name, Namespace: namespace},
				FeedbackRules: []workv1.FeedbackRule{
					{Type: workv1.WellKnownStatusType},
					{Type: workv1.JSONPathsType, JsonPaths: []workv1.JsonPath{
						{Name: FeedbackReady, Path: ".readyReplicas"},
						{Name: FeedbackAvailableCondition, Path: `.conditions[?(@.type=="Available")].status`},
					}},
				},
			}},
		},
	}
	w.Annotations = map[string]string{SpecHashAnnotation: specHash(w.Spec)}
	return w
}

func specHash(spec workv1.ManifestWorkSpec) string {
	b, err := json.Marshal(spec)
	if err != nil {
		panic(err) // a spec of raw JSON and plain fields always marshals
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// Feedback returns the status feedback values of a work's manifests, by
// name.
func Feedback(w *workv1.ManifestWork) map[string]workv1.FieldValue {
	values := map[string]workv1.FieldValue{}
	for _, m := range w.Status.ResourceStatus.Manifests {
		for _, v := range m.StatusFeedbacks.Values {
			values[v.Name] = v.Value
		}
	}
	return values
}

// AvailableWith says whether the agent reports w Available at w's current
// generation, with replicas ready and available by its status feedback.
func AvailableWith(w *workv1.ManifestWork, replicas int64) bool {
	c := meta.FindStatusCondition(w.Status.Conditions, workv1.WorkAvailable)
	if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != w.Generation {
		return false
	}
	v := Feedback(w)
	isInt := func(name string) bool { x := v[name].Integer; return x != nil && *x == replicas }
	available := v[FeedbackAvailableCondition].String
	return isInt(FeedbackReadyReplicas) && isInt(FeedbackAvailableReplicas) && isInt(FeedbackReady) &&
		available != nil && *available == "True"
}
