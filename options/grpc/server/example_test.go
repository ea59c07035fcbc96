package server_test

import (
	"context"
	"fmt"
	"net"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options/grpc/server"
)

// A broker with mutual TLS and bearer tokens, static grants, and metrics on
// the program's own registry. (For Kubernetes, use kubeauth.NewTokenReview
// and kubeauth.NewSubjectAccessReview instead of the static tables.)
func ExampleNew() {
	cfg := server.Config{TLS: server.TLSConfig{
		CertFile: "/etc/workwire/tls.crt", KeyFile: "/etc/workwire/tls.key", ClientCAFile: "/etc/workwire/clients-ca.pem",
	}}
	srv, err := server.New(cfg,
		server.WithAuthenticator(server.AnyAuthenticator(
			server.StaticAuthenticator{Tokens: map[string]server.Identity{"s3cret": {User: "hub"}}},
			server.CertificateAuthenticator{}, // agents: the certificate's CN
		)),
		server.WithAuthorizer(server.StaticAuthorizer{
			Sources:  map[string][]string{"hub": {"hub"}},
			Clusters: map[string][]string{"agent-cluster1": {"cluster1"}},
		}),
		server.WithRegisterer(prometheus.NewRegistry()),
	)
	if err != nil {
		fmt.Println(err) // the certificate files do not exist here
		return
	}
	lis, _ := net.Listen("tcp", ":8090")
	_ = srv.Serve(context.Background(), lis)
}

// The broker as the source of a data type, over a Service (here in memory;
// in production over a kube-apiserver or a database shared by replicas).
func ExampleWithService() {
	const dt = "io.open-cluster-management.works.v1alpha1.manifestbundles"
	svc := server.NewMemoryService(dt)
	srv, err := server.New(server.Config{SourceID: "kube"}, server.WithService(dt, svc), server.WithLogger(logr.Discard()))
	if err != nil {
		panic(err)
	}
	evt := cloudevents.New()
	evt.SetID("1")
	evt.SetSource(srv.SourceID())
	evt.SetType(dt + ".spec.create_request")
	evt.SetExtension(types.ExtResourceID, "work-1")
	evt.SetExtension(types.ExtResourceVersion, int32(1))
	evt.SetExtension(types.ExtClusterName, "cluster1")
	// Sent at once to cluster1's agent if it is connected to this replica,
	// else when the agent's spec resync reaches any replica.
	if err := svc.Put(context.Background(), &evt); err != nil {
		panic(err)
	}
	fmt.Println(srv.SourceID(), srv.Subscribers())
	// Output: kube 0
}
