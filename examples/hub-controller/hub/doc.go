// Package hub is the hub controller of examples/hub-controller: the
// client-go controller pattern — a shared informer and its lister, event
// handlers, a rate-limited workqueue, one reconcile per work, conflicts
// retried by requeueing — over the workv1 clientset of a
// work.ClientHolder.
//
// The controller owns the works labelled ManagedByLabel=ManagedBy. It wants
// a number of works on each cluster, each one nginx Deployment (NewWork)
// with status feedback rules: WellKnownStatus (replicas, readyReplicas,
// availableReplicas) and two JSON paths under .status (.readyReplicas, and
// the status of the Available condition). Each reconcile creates a missing
// work, updates one whose spec changed (it compares SpecHashAnnotation, so
// a kube-apiserver's defaults never look like a change), and deletes one
// it no longer wants.
//
// Nothing in it knows how the clientset talks: the same code runs over a
// kube-apiserver and over events. Only the line that builds the holder
// differs, in main.go:
//
//	work.NewClientHolderBuilder(restConfig)                        // a kube-apiserver
//	work.NewClientHolderBuilder(&mqttConfig).WithSourceID(sourceID) // events over MQTT
//
// Over events, Create, Update and Delete publish spec events to the
// clusters' agents, and the statuses the agents publish land in the
// holder's store, where the informer sees them. A deleted work stays,
// marked, until its agent confirms it removed the work's resources.
//
// Run it with the work agent of examples/work-agent, from two terminals:
//
//	go run ./examples/hub-controller -embedded-broker -clusters cluster1 -lifecycle
//	go run ./examples/work-agent -broker <the address the hub printed> -cluster cluster1
package hub
