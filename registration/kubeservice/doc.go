// Package kubeservice holds the gRPC server's Services (server.Service) of
// the types registration over gRPC carries, over a kube-apiserver: hub
// controllers keep using the kube-apiserver unchanged, and the server
// translates between it and the agents' events, on OCM's wire (see
// codec.KubeCodec), so OCM's own agents join through it too.
//
// Each type has a policy of what an agent may ask (the constructors say
// which), always for its own cluster only: the object must belong to the
// cluster the event names, for which the server authorized the agent.
//
//   - ManagedClusters: create its cluster, update its status.
//   - CertificateSigningRequests: create one for a client certificate of
//     its cluster, signed by GRPCSigner; the Service records the agent's
//     verified user in CSRUserAnnotation, which approvers decide on.
//   - Leases: renew those of its namespace.
//   - Events: create them, update their series.
//   - ManagedClusterAddOns (v1alpha1 and v1beta1): update their status,
//     or answer a status resync with it. Both versions read one v1alpha1
//     informer; the v1beta1 Service converts each add-on itself, so no
//     conversion webhook is needed.
//   - CertificateSigningRequests of its add-ons (labelled with the add-on's
//     name): for the signer the add-on's registration names, and the
//     add-on's own identity on its cluster.
//   - ServiceAccount token requests: a token of a service account of its
//     cluster's namespace (TokenRequests).
//
// Anything else is refused with a Kubernetes error the agent reads as one:
// the server returns it as OCM's agents expect (FailedPrecondition carrying
// the status as JSON).
package kubeservice
