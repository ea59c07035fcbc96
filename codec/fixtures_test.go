package codec

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	cetypes "github.com/cloudevents/sdk-go/v2/types"
	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/generic/types"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	testSource  = "sd3ded4v-mwrs-hub-controller"
	testAgent   = "cluster1-work-agent"
	testCluster = "cluster1"
	testUID     = "a52adbe8-b6f2-52c8-9378-c4f544502fb7"
)

// deploymentJSON is a realistic ~2 KB Deployment: labels, annotations,
// resources, env, probes.
const deploymentJSON = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"checkout-api","namespace":"shop",` +
	`"labels":{"app.kubernetes.io/name":"checkout-api","app.kubernetes.io/part-of":"shop","app.kubernetes.io/version":"2.14.3","team":"payments"},` +
	`"annotations":{"deployment.kubernetes.io/revision":"7","workwire.io/owner":"payments-platform","prometheus.io/scrape":"true","prometheus.io/port":"9090"}},` +
	`"spec":{"replicas":3,"revisionHistoryLimit":5,"selector":{"matchLabels":{"app.kubernetes.io/name":"checkout-api"}},` +
	`"strategy":{"type":"RollingUpdate","rollingUpdate":{"maxSurge":"25%","maxUnavailable":0}},` +
	`"template":{"metadata":{"labels":{"app.kubernetes.io/name":"checkout-api","app.kubernetes.io/part-of":"shop","team":"payments"},` +
	`"annotations":{"prometheus.io/scrape":"true","prometheus.io/port":"9090"}},` +
	`"spec":{"serviceAccountName":"checkout-api","terminationGracePeriodSeconds":45,` +
	`"securityContext":{"runAsNonRoot":true,"runAsUser":10001,"fsGroup":10001},` +
	`"containers":[{"name":"api","image":"registry.example.com/shop/checkout-api:2.14.3","imagePullPolicy":"IfNotPresent",` +
	`"args":["--listen=:8080","--metrics=:9090","--log-level=info"],` +
	`"ports":[{"name":"http","containerPort":8080,"protocol":"TCP"},{"name":"metrics","containerPort":9090,"protocol":"TCP"}],` +
	`"env":[{"name":"DATABASE_URL","valueFrom":{"secretKeyRef":{"name":"checkout-db","key":"url"}}},` +
	`{"name":"PAYMENT_GATEWAY","value":"https://pay.example.com/v2"},{"name":"CACHE_TTL","value":"30s"},` +
	`{"name":"POD_NAME","valueFrom":{"fieldRef":{"fieldPath":"metadata.name"}}},{"name":"GOMAXPROCS","valueFrom":{"resourceFieldRef":{"resource":"limits.cpu"}}}],` +
	`"resources":{"requests":{"cpu":"250m","memory":"256Mi"},"limits":{"cpu":"1","memory":"512Mi"}},` +
	`"readinessProbe":{"httpGet":{"path":"/readyz","port":"http"},"initialDelaySeconds":5,"periodSeconds":10,"failureThreshold":3},` +
	`"livenessProbe":{"httpGet":{"path":"/healthz","port":"http"},"initialDelaySeconds":15,"periodSeconds":20,"timeoutSeconds":2},` +
	`"volumeMounts":[{"name":"config","mountPath":"/etc/checkout","readOnly":true}]}],` +
	`"volumes":[{"name":"config","configMap":{"name":"checkout-api-config"}}]}}}}`

// deploymentStatusJSON is what a feedback rule {"name":"status","path":".status"} returns.
const deploymentStatusJSON = `{"availableReplicas":3,"conditions":[{"lastTransitionTime":"2024-05-02T10:01:11Z","lastUpdateTime":"2024-05-02T10:01:14Z","message":"ReplicaSet \"checkout-api-7d9c\" has successfully progressed.","reason":"NewReplicaSetAvailable","status":"True","type":"Progressing"},{"lastTransitionTime":"2024-05-02T10:02:15Z","lastUpdateTime":"2024-05-02T10:02:15Z","message":"Deployment has minimum availability.","reason":"MinimumReplicasAvailable","status":"True","type":"Available"}],"observedGeneration":7,"readyReplicas":3,"replicas":3,"updatedReplicas":3}`

var testTime = metav1.NewTime(time.Date(2024, 5, 2, 10, 0, 0, 0, time.UTC))

// specWork is a work as a source holds it: one Deployment, a feedback rule,
// labels and annotations, and fields the wire leaves out (resourceVersion,
// finalizers, managedFields).
func specWork() *workv1.ManifestWork {
	return &workv1.ManifestWork{
		ObjectMeta: metav1.ObjectMeta{
			Name:              "checkout-api",
			Namespace:         testCluster,
			UID:               testUID,
			Generation:        7,
			ResourceVersion:   "123456",
			CreationTimestamp: testTime,
			Labels:            map[string]string{"app": "checkout-api", "team": "payments"},
			Annotations:       map[string]string{"workwire.io/owner": "payments-platform"},
			Finalizers:        []string{"cluster.open-cluster-management.io/manifest-work-cleanup"},
			ManagedFields:     []metav1.ManagedFieldsEntry{{Manager: "hub", Operation: metav1.ManagedFieldsOperationUpdate}},
		},
		Spec: workv1.ManifestWorkSpec{
			Workload:     workv1.ManifestsTemplate{Manifests: []workv1.Manifest{{RawExtension: runtime.RawExtension{Raw: []byte(deploymentJSON)}}}},
			DeleteOption: &workv1.DeleteOption{PropagationPolicy: workv1.DeletePropagationPolicyTypeForeground},
			ManifestConfigs: []workv1.ManifestConfigOption{{
				ResourceIdentifier: workv1.ResourceIdentifier{Group: "apps", Resource: "deployments", Name: "checkout-api", Namespace: "shop"},
				FeedbackRules: []workv1.FeedbackRule{
					{Type: workv1.WellKnownStatusType},
					{Type: workv1.JSONPathsType, JsonPaths: []workv1.JsonPath{{Name: "status", Path: ".status"}}},
				},
				UpdateStrategy: &workv1.UpdateStrategy{Type: workv1.UpdateStrategyTypeServerSideApply, ServerSideApply: &workv1.ServerSideApplyConfig{Force: true, FieldManager: "work-agent"}},
			}},
		},
	}
}

// wantAgentWork is what an agent decodes from a spec event of specWork sent by testSource.
func wantAgentWork(src *workv1.ManifestWork) *workv1.ManifestWork {
	w := &workv1.ManifestWork{
		TypeMeta: metav1.TypeMeta{Kind: "ManifestWork", APIVersion: "work.open-cluster-management.io/v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name:              src.Name,
			Namespace:         src.Namespace,
			UID:               src.UID,
			Generation:        src.Generation,
			ResourceVersion:   "7",
			CreationTimestamp: src.CreationTimestamp,
			DeletionTimestamp: src.DeletionTimestamp,
			Labels:            src.Labels,
			Annotations:       map[string]string{OriginalSourceAnnotation: testSource},
		},
		Spec: src.Spec,
	}
	for k, v := range src.Annotations {
		w.Annotations[k] = v
	}
	return w
}

func ptr[T any](v T) *T { return &v }

func conditions(gen int64) []metav1.Condition {
	return []metav1.Condition{
		{Type: "Applied", Status: metav1.ConditionTrue, ObservedGeneration: gen, LastTransitionTime: testTime, Reason: "AppliedManifestWorkComplete", Message: "Apply manifest work complete"},
		{Type: "Available", Status: metav1.ConditionTrue, ObservedGeneration: gen, LastTransitionTime: testTime, Reason: "ResourcesAvailable", Message: "All resources are available"},
	}
}

// statusWork is a work as an agent holds it after applying specWork: the
// original-source annotation, Applied/Available conditions and feedback
// values of every kind.
func statusWork() *workv1.ManifestWork {
	w := wantAgentWork(specWork())
	w.Status = workv1.ManifestWorkStatus{
		Conditions: conditions(7),
		ResourceStatus: workv1.ManifestResourceStatus{Manifests: []workv1.ManifestCondition{{
			ResourceMeta: workv1.ManifestResourceMeta{Ordinal: 0, Group: "apps", Version: "v1", Kind: "Deployment", Resource: "deployments", Name: "checkout-api", Namespace: "shop"},
			StatusFeedbacks: workv1.StatusFeedbackResult{Values: []workv1.FeedbackValue{
				{Name: "ReadyReplicas", Value: workv1.FieldValue{Type: workv1.Integer, Integer: ptr[int64](3)}},
				{Name: "AvailableReplicas", Value: workv1.FieldValue{Type: workv1.Integer, Integer: ptr[int64](3)}},
				{Name: "image", Value: workv1.FieldValue{Type: workv1.String, String: ptr("registry.example.com/shop/checkout-api:2.14.3")}},
				{Name: "paused", Value: workv1.FieldValue{Type: workv1.Boolean, Boolean: ptr(false)}},
				{Name: "status", Value: workv1.FieldValue{Type: workv1.JsonRaw, JsonRaw: ptr(deploymentStatusJSON)}},
			}},
			Conditions: conditions(7),
		}}},
	}
	w.Status.ResourceStatus.Manifests[0].Conditions[0].Reason = "AppliedManifestComplete"
	return w
}

// wantSourceWork is what a source decodes from a status event of w.
func wantSourceWork(w *workv1.ManifestWork) *workv1.ManifestWork {
	return &workv1.ManifestWork{
		TypeMeta:   metav1.TypeMeta{Kind: "ManifestWork", APIVersion: "work.open-cluster-management.io/v1"},
		ObjectMeta: metav1.ObjectMeta{UID: w.UID, Generation: w.Generation, Namespace: w.Namespace},
		Status:     w.Status,
	}
}

func eventType(dt types.DataType, sub types.SubResource, action types.Action) types.EventType {
	return types.EventType{DataType: dt, SubResource: sub, Action: action}
}

// readProtocolExample reads a structured-mode event of testdata/protocol.
func readProtocolExample(tb testing.TB, name string) *cloudevents.Event {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "protocol", name))
	if err != nil {
		tb.Fatal(err)
	}
	evt := cloudevents.New()
	if err := json.Unmarshal(raw, &evt); err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	return &evt
}

// viaStructuredJSON sends evt through the CloudEvents structured JSON format.
func viaStructuredJSON(tb testing.TB, evt *cloudevents.Event) *cloudevents.Event {
	tb.Helper()
	raw, err := json.Marshal(evt)
	if err != nil {
		tb.Fatal(err)
	}
	out := cloudevents.New()
	if err := json.Unmarshal(raw, &out); err != nil {
		tb.Fatalf("%v\n%s", err, raw)
	}
	return &out
}

// viaStrings re-creates evt with every extension in its string form, as the
// MQTT binding delivers it (user properties are strings).
func viaStrings(tb testing.TB, evt *cloudevents.Event) *cloudevents.Event {
	tb.Helper()
	out, err := stringify(evt)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

func stringify(evt *cloudevents.Event) (*cloudevents.Event, error) {
	out := evt.Clone()
	for name, v := range evt.Extensions() {
		s, err := cetypes.Format(v)
		if err != nil {
			return nil, fmt.Errorf("extension %s: %w", name, err)
		}
		out.SetExtension(name, s)
	}
	for name, v := range out.Extensions() {
		if _, ok := v.(string); !ok {
			return nil, fmt.Errorf("extension %s is still a %T", name, v)
		}
	}
	return &out, nil
}
