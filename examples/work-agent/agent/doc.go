// Package agent is the work agent of examples/work-agent: an ordinary
// controller — informer, lister, rate-limited workqueue — over the workv1
// clientset of a work.ClientHolder built with WithClusterName. The works
// arrive from sources as events; the controller applies their manifests to
// a cluster through a dynamic.Interface and reports back through
// UpdateStatus, which the holder publishes to each work's source.
//
// For each work, the controller
//
//   - holds the Finalizer on it, so a deletion waits for the cleanup;
//   - applies every manifest (the manifest's update strategy: Update, the
//     default, CreateOnly, ServerSideApply with field manager
//     "workwire-agent", or ReadOnly);
//   - reports one manifest condition per manifest: its resourceMeta (group,
//     version, kind, resource, name, namespace, ordinal), Applied and
//     Available, and — when the work's manifestConfigs ask for status
//     feedback — the values (package feedback: WellKnownStatus and
//     JSONPaths) with a StatusFeedbackSynced condition;
//   - reports the work's own Applied and Available conditions, with the
//     work's generation as their observedGeneration;
//   - refreshes the status feedback every StatusUpdateFrequency (as OCM's
//     work agent does), and every second while the values keep changing;
//   - deletes what an earlier generation applied and this one dropped;
//   - when the source deletes the work (a deletionTimestamp), deletes its
//     resources in the foreground — unless the work's DeleteOption orphans
//     them (Orphan, or SelectivelyOrphan's rules) — and removes its
//     finalizer; the holder then removes the work and reports it Deleted
//     to the source.
//
// What the agent applied is in each work's status, and its holder keeps the
// works themselves in an agent state (work.ClientHolderBuilder.WithAgentState;
// the command keeps it in Secrets of the cluster it applies to): an agent
// that restarts still holds every work it held, with its finalizer, so a
// work deleted while it was down is cleaned up like any other before its
// source hears it is gone.
//
// Run it against the hub controller of examples/hub-controller, from two
// terminals:
//
//	go run ./examples/hub-controller -embedded-broker -clusters cluster1 -lifecycle
//	go run ./examples/work-agent -broker <the address the hub printed> -cluster cluster1
//
// Without -kubeconfig the agent applies to an in-memory cluster (package
// fakecluster), whose Deployments roll out at once; with it, to a real one.
package agent
