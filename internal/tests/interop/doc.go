// Package interop runs OCM's peers (open-cluster-management.io/sdk-go
// v1.3.0) against workwire's in one process, as a user's mixed fleet would:
// an OCM hub with workwire agents, a workwire hub with OCM agents, over MQTT,
// gRPC and Pub/Sub (the client library's fake, pstest), and OCM's agent-side registration clients (cluster, CSR, lease,
// event) against workwire's broker and its registration Services over a real
// kube-apiserver (skipped without one: see internal/testsupport/kubetest). It is a
// module of its own so the main module never depends on
// OCM's; it holds tests only.
package interop
