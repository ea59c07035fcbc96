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
// each such change a new generation; a stale resourceVersion is a Conflict.
// Delete sets the deletionTimestamp, bumps the generation and publishes a
// delete_request; the work leaves the store when its agent reports the
// Deleted condition (at once if no agent ever reported on it), and its
// finalizers are gone. Statuses from agents land in the store; UpdateStatus
// is MethodNotAllowed. Writes never wait for the broker: a publisher sends
// them in the background, newest first, and resync heals what it could not.
//
// The store is in memory: after a restart, a hub's controllers create their
// works again (new UIDs); agents replace their copies by name. Orphans — works
// agents hold that the hub no longer has — are deleted only after
// DefaultOrphanGracePeriod, so a restarting hub has time to create again.
//
// # Agent (WithClusterName)
//
// Works arrive from sources. Create and Delete are MethodNotAllowed.
// UpdateStatus and status patches publish the status to the work's source;
// finalizer, label and annotation changes stay on the cluster; changing the
// spec is Forbidden. A source's deletion shows as a deletionTimestamp; the
// work leaves the store once its finalizers are removed, and the holder
// reports a last status with the Deleted condition. A status written from
// an old read never undoes a deletion.
//
// # Both
//
// Get, List (label selectors; field selectors metadata.name and
// metadata.namespace; Limit/Continue over a consistent snapshot) and Watch
// (resuming from a resourceVersion, with client-go's watch-list protocol)
// serve from the store, so a SharedInformer syncs once and never relists in
// a loop. AppliedManifestWorks, ManifestWorkReplicaSets and RESTClient
// answer every call with a MethodNotAllowed API error; Discovery lists what
// is served. Every method is goroutine-safe; none returns nil or panics.
package work
