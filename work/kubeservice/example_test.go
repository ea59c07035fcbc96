package kubeservice_test

import (
	"context"
	"net"

	"k8s.io/client-go/rest"
	workclientset "open-cluster-management.io/api/client/work/clientset/versioned"
	workinformers "open-cluster-management.io/api/client/work/informers/externalversions"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/options/grpc/server"
	"github.com/workwire/sdk-go/work/kubeservice"
)

// A gRPC server that serves work agents the ManifestWorks of a hub's
// kube-apiserver, and writes their statuses back there.
func ExampleNew() {
	run := func(ctx context.Context, hub *rest.Config, lis net.Listener) error {
		works, err := workclientset.NewForConfig(hub)
		if err != nil {
			return err
		}
		factory := workinformers.NewSharedInformerFactory(works, 0)
		svc, err := kubeservice.New(works, factory.Work().V1().ManifestWorks(), server.DefaultSourceID)
		if err != nil {
			return err
		}
		srv, err := server.New(server.Config{}, server.WithService(codec.ManifestBundlesDataType.String(), svc))
		if err != nil {
			return err
		}
		factory.Start(ctx.Done())
		defer factory.Shutdown()
		finalizers := make(chan struct{})
		go func() { defer close(finalizers); svc.Run(ctx) }()
		defer func() { <-finalizers }() // Run ends with ctx, as Serve does
		return srv.Serve(ctx, lis)
	}
	_ = run
}
