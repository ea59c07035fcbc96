package codec

import (
	"fmt"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
)

// ManifestBundleCodec encodes and decodes ManifestWorks as manifestbundles
// events: a whole work per event (ManifestBundle on spec events,
// ManifestBundleStatus on status events). It is stateless and
// goroutine-safe; the zero value is ready to use.
type ManifestBundleCodec struct{}

var _ generic.Codec[*workv1.ManifestWork] = (*ManifestBundleCodec)(nil)

// NewManifestBundleCodec returns a ManifestBundleCodec. It has no options:
// the codec is stateless, and one value may serve any number of clients and
// goroutines.
func NewManifestBundleCodec() *ManifestBundleCodec { return &ManifestBundleCodec{} }

// DataType returns ManifestBundlesDataType (the plural form).
func (*ManifestBundleCodec) DataType() types.DataType { return ManifestBundlesDataType }

// Encode returns the event of type t for work, with source as its
// CloudEvents source. t's data type must be ManifestBundlesDataType or its
// singular form; the event always names the plural.
//
// A spec event (create_request, update_request, delete_request; sources call
// this) carries the resourceid (work.UID), resourceversion (work.Generation),
// clustername (work.Namespace), metadata (name, namespace, uid, generation,
// labels, annotations and timestamps as JSON) and, for a work being deleted
// or a delete_request, deletiontimestamp extensions, and a ManifestBundle as
// data; a delete_request carries no data.
//
// A status event (update_request only; agents call this) carries resourceid,
// resourceversion, clustername and originalsource (from the work's
// OriginalSourceAnnotation, which must be set) and a ManifestBundleStatus.
//
// Errors are *Error values. Encode does not modify work, and is safe for
// concurrent use.
func (*ManifestBundleCodec) Encode(source string, t types.EventType, work *workv1.ManifestWork) (*cloudevents.Event, error) {
	return bundlePayloads.encode(source, t, work)
}

// Decode returns the work evt carries. It accepts ManifestBundlesDataType in
// plural or singular form, and any action but resync_request.
//
// From a spec event (agents call this) it returns a work whose UID is the
// resourceid, Generation and ResourceVersion the resourceversion, Namespace
// the clustername (else the metadata's namespace), Name, labels and
// annotations from the metadata (Name defaults to the resourceid), the
// OriginalSourceAnnotation set to the event's source, DeletionTimestamp from
// deletiontimestamp (a delete_request without one gets the event time), and
// the spec from the data (a delete_request may have none).
//
// From a status event (sources call this) it returns a work with only UID,
// Generation (resourceversion, if present), Namespace (clustername, if
// present) and Status set.
//
// Decode never panics; every problem is an *Error that names the event and
// the field. The returned work shares nothing with evt. Decode is safe for
// concurrent use, also on the same event.
func (*ManifestBundleCodec) Decode(h types.Header, evt *cloudevents.Event) (*workv1.ManifestWork, error) {
	return bundlePayloads.decode(h, evt)
}

var bundlePayloads = &payloads{
	dataType:     ManifestBundlesDataType,
	encodeSpec:   encodeBundleSpec,
	encodeStatus: encodeBundleStatus,
	decodeSpec:   decodeBundleSpec,
	decodeStatus: decodeBundleStatus,
}

func encodeBundleStatus(work *workv1.ManifestWork) ([]byte, error) {
	return marshalData(&ManifestBundleStatus{
		Conditions:     work.Status.Conditions,
		ResourceStatus: work.Status.ResourceStatus.Manifests,
	})
}

func decodeBundleSpec(work *workv1.ManifestWork, data []byte) error {
	var b ManifestBundle
	if err := unmarshal(data, &b, fastManifestBundle); err != nil {
		return atField("data", jsonError(err))
	}
	for i := range b.Manifests {
		if raw := b.Manifests[i].Raw; !isJSONObject(raw) {
			return atField(fmt.Sprintf("data.manifests[%d]", i), fmt.Errorf("not a JSON object (got %s)", jsonKind(raw)))
		}
	}
	work.Spec = workv1.ManifestWorkSpec{
		Workload:        workv1.ManifestsTemplate{Manifests: b.Manifests},
		DeleteOption:    b.DeleteOption,
		ManifestConfigs: b.ManifestConfigs,
		Executor:        b.Executor,
	}
	return nil
}

func decodeBundleStatus(work *workv1.ManifestWork, data []byte) error {
	var s ManifestBundleStatus
	if err := unmarshal(data, &s, fastBundleStatus); err != nil {
		return atField("data", jsonError(err))
	}
	work.Status = workv1.ManifestWorkStatus{
		Conditions:     s.Conditions,
		ResourceStatus: workv1.ManifestResourceStatus{Manifests: s.ResourceStatus},
	}
	return nil
}
