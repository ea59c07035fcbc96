// Package codec holds the codecs that carry Open Cluster Management
// ManifestWorks (open-cluster-management.io/api/work/v1) in CloudEvents, for
// the generic source and agent clients.
//
// Two codecs, two data types:
//
//   - ManifestBundleCodec, data type ManifestBundlesDataType
//     ("io.open-cluster-management.works.v1alpha1.manifestbundles"): a whole
//     work per event. Spec events carry a ManifestBundle (manifests, delete
//     option, manifest configs, executor); status events a
//     ManifestBundleStatus (the work's conditions, and the status of each
//     manifest as a list under resourceStatus).
//   - ManifestCodec, data type ManifestsDataType
//     ("io.open-cluster-management.works.v1alpha1.manifests"): a work with
//     exactly one manifest. Spec events carry a Manifest; status events a
//     ManifestStatus, whose contentStatus is the resource's whole status.
//
// One codec value serves both sides; the event type's subresource says which
// way an event goes:
//
//	side    calls                                  event
//	source  Encode(sourceID, spec type, work)      spec: create_request, update_request, delete_request
//	agent   Decode(header, spec event)             -> the work to apply
//	agent   Encode(agentID, status type, work)     status: update_request
//	source  Decode(header, status event)           -> the work's identity and status
//
// The clients parse an event's header (types.ParseHeader: its type and the
// extensions that identify and route the work) once, as it arrives, and hand
// it to Decode with the event, whose data and metadata extension are the
// codec's; code holding an event of its own calls generic.Decode, which
// parses the header first.
//
// Resync requests (resync_request) carry no work: the clients handle them,
// and the codecs refuse them.
//
// Singular and plural: some peers name the data types in the singular ("…manifestbundle.spec.create_request"). Both Encode and Decode
// accept either form; Encode always emits the plural, which is what
// DataType returns.
//
// Extensions: Encode sets resourceid (the work's UID), resourceversion (its
// Generation, a 32-bit CloudEvents integer) and clustername (its Namespace);
// spec events also metadata (the work's name, namespace, uid, generation,
// labels, annotations and timestamps as JSON) and, when the work is being
// deleted, deletiontimestamp. Decode accepts resourceversion as an integer or
// a decimal string, since the MQTT binding delivers every extension as a
// string, and treats clustername and metadata as optional.
//
// OriginalSourceAnnotation links the two directions on the agent, as OCM's
// peers link them: Decode of a spec event records the event's source in it,
// and Encode of a status event reads it to address the status (the
// originalsource extension) to that source. Encode fails with
// ErrNoOriginalSource for a work without it. The agent client routes a
// status by what it knows of the work's source, not by the annotation,
// which it falls back on only for a work no source has sent it since it
// started.
//
// The codecs are stateless and goroutine-safe. Decode never panics on any
// input; every error is an *Error naming the event (type and id), the work,
// and the field at fault (a header that cannot be parsed is the parser's
// error: generic.Decode returns it as a *generic.DecodeError). StatusHash is the status hash for status resync.
package codec
