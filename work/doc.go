// Package work is the drop-in workv1 clientset: change the one line that
// builds a controller's ManifestWork clientset, and its controllers,
// informers and listers keep working — over events.
//
//	holder, err := work.NewClientHolderBuilder(&mqtt.Config{BrokerHost: "broker:1883"}).
//		WithSourceID("hub1").NewClientHolder()
//	...
//	err = holder.Start(ctx)
//	works := holder.WorkInterface().WorkV1().ManifestWorks("cluster1")
//
// With a *rest.Config instead, the holder hands out the ordinary clientset
// over a kube-apiserver, so switching back is the same one line.
//
// # Hub (WithSourceID)
//
// The clientset is backed by an in-memory store fed by a
// generic.SourceClient. Create assigns a UID, generation 1 and a
// resourceVersion and publishes a create_request; Update and Patch (JSON
// merge patch, JSON patch, server-side apply with managed fields; strategic
// merge patch answers 415 as a kube-apiserver does for a custom resource)
// publish an update_request when the spec, labels or annotations change,
// each such change a new generation; a stale resourceVersion is a Conflict,
// and an Update without one is Invalid ("metadata.resourceVersion: must be
// specified for an update"), as a kube-apiserver answers for a custom
// resource (patches apply to the current object and need none); a Create
// that carries a resourceVersion is a BadRequest, as there. Managed fields
// are recorded from a work's first apply on: writes to a work never
// applied record none (they would cost memory on every work), so an apply
// that takes over fields such a write set conflicts with the manager
// "before-first-apply", as a kube-apiserver names the owner of fields
// written before server-side apply.
// Delete sets the deletionTimestamp, bumps the generation and publishes a
// delete_request; the work leaves the store when its agent reports the
// Deleted condition (at once if no agent ever reported on it), and its
// finalizers are gone. DeleteCollection deletes each matching work that
// way. Statuses from agents land in the store; UpdateStatus is
// MethodNotAllowed. Writes never wait for the broker: a publisher sends
// them in the background, newest first, retries what may pass later, and
// resync heals what it could not.
//
// Create, Update and Patch refuse, as 422 Invalid naming each, manifests
// that are not JSON objects with an apiVersion and a kind, as a
// kube-apiserver (whose CRD declares them embedded resources) and
// work/workstore do.
//
// A work too large, or that can never be sent, is refused or reported,
// never retried: Create, Update and Patch answer a work whose manifests and
// metadata alone exceed DefaultMaxWorkBytes (1.5 MiB, what a kube-apiserver
// stores; see ClientHolderBuilder.WithMaxWorkBytes), or the transport's
// event size limit if it is known (options.EventSizeLimiter), with 413
// Request Entity Too Large naming the sizes and the limit; a work that
// fails to publish with a permanent error (options.ErrTooLarge from the
// transport or broker, generic.ErrEncode from the codec) goes to the error
// handler (WithErrorHandler), named, at once, and stays undelivered — its
// Applied condition never reaches its generation — until it changes.
// Neither holds up the works behind it.
//
// The store is in memory: after a restart, a hub's controllers create their
// works again (new UIDs); agents replace their copies by name. Orphans — works
// agents hold that the hub no longer has — are deleted only after
// DefaultOrphanGracePeriod, so a restarting hub has time to create again.
//
// # Agent (WithClusterName)
//
// Works arrive from sources. Create, Delete and DeleteCollection are
// MethodNotAllowed. UpdateStatus and status patches publish the status to
// the work's source; finalizer, label and annotation changes stay on the
// cluster; changing the spec is Forbidden. Update and UpdateStatus need the
// resourceVersion, as on the hub. A source's deletion shows as a
// deletionTimestamp; the work leaves the store once its finalizers are
// removed, and the holder reports a last status with the Deleted condition.
// A status written from an old read is a Conflict; one written from a read
// after the deletion arrived keeps it.
//
// Labels and annotations follow one rule: the source owns the keys it
// sends in a spec event's metadata, the agent owns the others. Each spec
// event sets the source's keys to the source's values and removes the keys
// the source sent before and no longer sends; keys the agent added itself
// stay, through every update from the source. An agent may change a
// source's key locally, until the source's next spec event sets it back.
// Nothing the agent sets reaches the source: status events carry status.
//
// # Both
//
// Get, List (label selectors; field selectors metadata.name and
// metadata.namespace; Limit/Continue over a consistent snapshot) and Watch
// (resuming from a resourceVersion, with client-go's watch-list protocol)
// serve from the store, so a SharedInformer syncs once and never relists in
// a loop. A watch that allows bookmarks (informers' do) gets one with the
// store's resourceVersion every minute and when it ends by its timeout, as
// from a kube-apiserver, so an informer limited to a namespace or a label
// selector resumes its watch from there however much changed elsewhere,
// rather than relisting because the store's history (4,096 events) no
// longer reaches back to the last change it saw. AppliedManifestWorks, ManifestWorkReplicaSets and RESTClient
// answer every call with a MethodNotAllowed API error; Discovery lists what
// is served. Every method is goroutine-safe; none returns nil or panics.
//
// Each side keeps one copy of a work: the holder's informer
// (ManifestWorkInformer, and any other the holder's factory makes) caches
// the objects its store holds, while Get, List and Watch of the clientset
// return copies the caller owns. So an object from a lister or an informer's
// event handler must not be changed in place — client-go's rule for every
// informer cache, and here a change would also reach what the holder
// publishes and resyncs: DeepCopy it first. Run a controller's tests with
// KUBE_CACHE_MUTATION_DETECTOR=true, and client-go's cache mutation
// detector panics on such a change, as with any informer.
package work
