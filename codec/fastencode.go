package codec

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/workwire/sdk-go/internal/jsonscan"

	workv1 "open-cluster-management.io/api/work/v1"
)

// Spec data is assembled rather than marshalled whole: json.Marshal would
// run every manifest through RawExtension.MarshalJSON and then re-scan and
// compact its bytes with encoding/json's slow scanner. The manifests go out
// as they are, checked with internal/jsonscan; the options go
// through one json.Marshal. The result is the JSON json.Marshal gives, byte
// for byte when the manifests are compact (TestSpecDataMatchesMarshal).

// bundleOptions is ManifestBundle without its manifests.
type bundleOptions struct {
	DeleteOption    *workv1.DeleteOption          `json:"deleteOption,omitempty"`
	ManifestConfigs []workv1.ManifestConfigOption `json:"manifestConfigs,omitempty"`
	Executor        *workv1.ManifestWorkExecutor  `json:"executor,omitempty"`
}

// manifestOptions is Manifest without its manifest.
type manifestOptions struct {
	DeleteOption *workv1.DeleteOption         `json:"deleteOption,omitempty"`
	ConfigOption *workv1.ManifestConfigOption `json:"configOption,omitempty"`
}

// manifestJSON returns the JSON of a manifest: its Raw bytes as they are, or
// the JSON of its Object, which must be a JSON object.
func manifestJSON(m *workv1.Manifest) ([]byte, error) {
	raw := m.Raw
	if raw == nil {
		if m.Object == nil {
			return nil, errors.New("empty")
		}
		var err error
		if raw, err = json.Marshal(m.Object); err != nil {
			return nil, err
		}
	}
	if !isJSONObject(raw) {
		return nil, fmt.Errorf("not a JSON object (got %s)", jsonKind(raw))
	}
	if !jsonscan.Valid(raw) {
		// Let encoding/json say what is wrong, and where.
		if err := json.Unmarshal(raw, new(json.RawMessage)); err != nil {
			return nil, jsonError(err)
		}
		return nil, errors.New("invalid JSON")
	}
	return raw, nil
}

// appendOptions appends the members of the JSON object opts to the object
// being written in buf and closes it.
func appendOptions(buf, opts []byte) []byte {
	if len(opts) <= 2 { // {}
		return append(buf, '}')
	}
	buf = append(buf, ',')
	return append(buf, opts[1:]...)
}

func encodeBundleSpec(work *workv1.ManifestWork) ([]byte, error) {
	ms := work.Spec.Workload.Manifests
	raws := make([][]byte, len(ms))
	size := 0
	for i := range ms {
		raw, err := manifestJSON(&ms[i])
		if err != nil {
			return nil, atField(fmt.Sprintf("spec.workload.manifests[%d]", i), err)
		}
		raws[i] = raw
		size += len(raw) + 1
	}
	opts, err := json.Marshal(&bundleOptions{
		DeleteOption:    work.Spec.DeleteOption,
		ManifestConfigs: work.Spec.ManifestConfigs,
		Executor:        work.Spec.Executor,
	})
	if err != nil {
		return nil, atField("data", err)
	}
	const head = `{"manifests":[`
	buf := make([]byte, 0, len(head)+size+1+len(opts))
	buf = append(buf, head...)
	for i, raw := range raws {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, raw...)
	}
	buf = append(buf, ']')
	return appendOptions(buf, opts), nil
}

func encodeManifestSpec(work *workv1.ManifestWork) ([]byte, error) {
	ms := work.Spec.Workload.Manifests
	if len(ms) != 1 {
		return nil, atField("spec.workload.manifests", fmt.Errorf("%d manifests, but the manifests codec carries exactly one: use manifestbundles", len(ms)))
	}
	raw, err := manifestJSON(&ms[0])
	if err != nil {
		return nil, atField("spec.workload.manifests[0]", err)
	}
	o := &manifestOptions{DeleteOption: work.Spec.DeleteOption}
	switch cs := work.Spec.ManifestConfigs; len(cs) {
	case 0:
	case 1:
		o.ConfigOption = &cs[0]
	default:
		return nil, atField("spec.manifestConfigs", fmt.Errorf("%d manifest configs, but the manifests codec carries at most one: use manifestbundles", len(cs)))
	}
	if work.Spec.Executor != nil {
		return nil, atField("spec.executor", errors.New("set, but the manifests codec cannot carry it: use manifestbundles"))
	}
	opts, err := json.Marshal(o)
	if err != nil {
		return nil, atField("data", err)
	}
	const head = `{"manifest":`
	buf := make([]byte, 0, len(head)+len(raw)+1+len(opts))
	buf = append(buf, head...)
	buf = append(buf, raw...)
	return appendOptions(buf, opts), nil
}
