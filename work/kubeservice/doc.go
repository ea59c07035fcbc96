// Package kubeservice serves ManifestWorks kept in a kube-apiserver through
// workwire's gRPC broker: the deployment in which hub
// controllers and add-ons go on using the hub's kube-apiserver as they do
// today, and work agents talk only to the gRPC server.
//
//	works := workclientset.NewForConfigOrDie(hubConfig)
//	factory := workinformers.NewSharedInformerFactory(works, 0)
//	svc, err := kubeservice.New(works, factory.Work().V1().ManifestWorks(), server.DefaultSourceID)
//	...
//	srv, err := server.New(cfg, server.WithService(codec.ManifestBundlesDataType.String(), svc))
//	factory.Start(ctx.Done())
//	go svc.Run(ctx) // puts Finalizer on works
//	err = srv.Serve(ctx, listener)
//
// The Service is a server.Service of the manifestbundles data type: the
// server sends each agent its cluster's works (the work's namespace is the
// cluster) as they change and when the agent resyncs, and hands the
// statuses agents report to the Service, which writes them to the work's
// status subresource. Its events come from sourceID, which must be the
// server's Config.SourceID, so agents address their statuses to the server.
//
// # Deletion
//
// Run puts Finalizer on every work, so a deleted work stays in the
// kube-apiserver, marked by its deletionTimestamp, until its agent has
// cleaned up and reported the Deleted condition; the Service then removes
// the finalizer. A work deleted before it got the finalizer leaves at once,
// and its agent removes it at its next spec resync.
//
// # Versions
//
// A work's resourceversion on the wire is its generation, which the
// kube-apiserver raises for every change of the spec. A change of labels or
// annotations alone reaches the agents as it happens, at the same
// generation; an agent that missed it (a broker outage) gets it at the next
// spec change, not at its resync.
//
// # Replicas
//
// Several servers, each with a Service over the same kube-apiserver, serve
// one fleet: each sends the agents connected to it what its informer sees,
// and writes what they report. A status is written only if no newer status
// of the work (by resourceversion, then sequenceid) went through the same
// replica; two replicas that both write a work's status serve it to the
// same agent only while it moves between them.
package kubeservice
