package codec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	workv1 "open-cluster-management.io/api/work/v1"
)

// The payload types below are the JSON "data" of the events the codecs
// encode and decode, for peers that want to build or read that data
// themselves. The codecs read and write the same JSON without going through
// these types field by field where that is faster, with the same result.
// They are plain values: safe to share between goroutines as long as nobody
// mutates them; their zero values are empty payloads.

// ManifestBundle is the data of a manifestbundles spec event (create_request
// or update_request): the spec of a ManifestWork. A delete_request carries no
// data.
type ManifestBundle struct {
	// Manifests are the Kubernetes resources to apply, each a JSON object.
	// Required; the codec always emits it, as [] when there are none, with
	// each manifest's bytes as they are.
	Manifests []workv1.Manifest `json:"manifests"`
	// DeleteOption is the deletion strategy. Optional; unset means the agent
	// deletes every manifest in the foreground.
	DeleteOption *workv1.DeleteOption `json:"deleteOption,omitempty"`
	// ManifestConfigs are per-manifest options: feedback rules, update
	// strategy, condition rules. Optional.
	ManifestConfigs []workv1.ManifestConfigOption `json:"manifestConfigs,omitempty"`
	// Executor is the identity the agent applies the manifests as. Optional;
	// unset means the agent's own.
	Executor *workv1.ManifestWorkExecutor `json:"executor,omitempty"`
}

// ManifestBundleStatus is the data of a manifestbundles status event: the
// status of a ManifestWork.
type ManifestBundleStatus struct {
	// Conditions are the work's own conditions (Applied, Available, …).
	Conditions []metav1.Condition `json:"conditions"`
	// ResourceStatus is the status of each manifest.
	ResourceStatus ResourceStatus `json:"resourceStatus"`
}

// ResourceStatus is the status of each manifest of a work. It is emitted as a
// JSON list of manifest conditions, the form deployed peers send and
// expect. Decoding also accepts the object forms
// {"manifestConditions": [...]} and {"manifests": [...]}
// (the workv1 field name); null and {} decode as empty.
type ResourceStatus []workv1.ManifestCondition

// errResourceStatusShape is the cause of a resourceStatus that is neither a
// list nor one of the accepted objects.
var errResourceStatusShape = errors.New(`want a list of manifest conditions, {"manifestConditions": [...]} or {"manifests": [...]}`)

// UnmarshalJSON accepts the list and both object forms of ResourceStatus.
func (s *ResourceStatus) UnmarshalJSON(data []byte) error {
	if err := s.unmarshal(data); err != nil {
		return fmt.Errorf("resourceStatus: %w", err)
	}
	return nil
}

func (s *ResourceStatus) unmarshal(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return errResourceStatusShape
	}
	switch data[0] {
	case 'n':
		if string(data) != "null" {
			return errResourceStatusShape
		}
		*s = nil
		return nil
	case '[':
		return json.Unmarshal(data, (*[]workv1.ManifestCondition)(s))
	case '{':
		var obj struct {
			ManifestConditions *[]workv1.ManifestCondition `json:"manifestConditions"`
			Manifests          *[]workv1.ManifestCondition `json:"manifests"`
		}
		if err := json.Unmarshal(data, &obj); err != nil {
			return err
		}
		switch {
		case obj.ManifestConditions != nil && obj.Manifests != nil:
			return errors.New(`has both "manifestConditions" and "manifests"`)
		case obj.ManifestConditions != nil:
			*s = *obj.ManifestConditions
		case obj.Manifests != nil:
			*s = *obj.Manifests
		case isEmptyObject(data):
			*s = nil
		default:
			return errResourceStatusShape
		}
		return nil
	default:
		return errResourceStatusShape
	}
}

// Manifest is the data of a manifests spec event (create_request or
// update_request): a work with exactly one manifest. A delete_request carries
// no data.
type Manifest struct {
	// Manifest is the Kubernetes resource to apply, a JSON object. Required.
	Manifest runtime.RawExtension `json:"manifest"`
	// DeleteOption is the deletion strategy. Optional; unset means foreground
	// deletion.
	DeleteOption *workv1.DeleteOption `json:"deleteOption,omitempty"`
	// ConfigOption holds the manifest's feedback rules, update strategy and
	// condition rules. Optional.
	ConfigOption *workv1.ManifestConfigOption `json:"configOption,omitempty"`
}

// ManifestStatus is the data of a manifests status event: the status of a
// work with one manifest.
type ManifestStatus struct {
	// ReconcileStatus holds the work's own conditions.
	ReconcileStatus ReconcileStatus `json:"reconcileStatus"`
	// ResourceMeta identifies the manifest's resource on the cluster.
	ResourceMeta workv1.ManifestResourceMeta `json:"resourceMeta"`
	// Conditions are the manifest's own conditions (Applied, Available, …).
	// Optional.
	Conditions []metav1.Condition `json:"conditions"`
	// StatusFeedback holds the values the manifest's feedback rules
	// collected. Optional: absent from the JSON when it has none.
	StatusFeedback workv1.StatusFeedbackResult `json:"statusFeedback,omitzero"`
	// ContentStatus is the resource's status as a raw JSON object. Optional;
	// the codec fills it from a JsonRaw feedback value named "status" and
	// turns it back into one on decode.
	ContentStatus json.RawMessage `json:"contentStatus,omitempty"`
}

// ReconcileStatus holds the conditions of a work on a cluster.
type ReconcileStatus struct {
	// Conditions are the work's conditions (Applied, Available, …).
	Conditions []metav1.Condition `json:"conditions"`
}

// isEmptyObject reports whether data is a JSON object without members.
func isEmptyObject(data []byte) bool {
	data = bytes.TrimSpace(data)
	if len(data) < 2 || data[0] != '{' || data[len(data)-1] != '}' {
		return false
	}
	return len(bytes.TrimSpace(data[1:len(data)-1])) == 0
}

// isJSONObject reports whether raw starts like a JSON object. Full validity
// is the JSON decoder's (or encoder's) job.
func isJSONObject[B []byte | string](raw B) bool {
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case ' ', '\t', '\r', '\n':
			continue
		case '{':
			return true
		default:
			return false
		}
	}
	return false
}
