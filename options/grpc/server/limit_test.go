package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	grpclib "google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options/grpc/grpctest"
	"github.com/workwire/sdk-go/options/grpc/protocol"
	"github.com/workwire/sdk-go/options/grpc/server"
)

// gRPC refuses a publish request larger than MaxReceiveBytes before
// Publish sees it, and answers the client itself: ResourceExhausted, with
// both sizes, in words workwire's client recognizes ("larger than max") and
// completes with the settings to raise. A request under it passes.
func TestAPublishOverMaxReceiveBytesIsResourceExhausted(t *testing.T) {
	t.Parallel()
	srv := grpctest.NewServerWithConfig(t, server.Config{MaxReceiveBytes: 64 << 10})
	conn, err := grpclib.NewClient(srv.Addr(), grpclib.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	publish := func(id string, n int) error {
		evt := event(id, "spec.create_request", map[string]string{types.ExtClusterName: "cluster1"})
		_ = evt.SetData(cloudevents.ApplicationJSON, map[string]string{"pad": strings.Repeat("x", n)})
		pbe, err := protocol.ToProto(evt)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = protocol.NewCloudEventServiceClient(conn).Publish(ctx, &protocol.PublishRequest{Event: pbe})
		return err
	}
	err = publish("big", 100<<10)
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "larger than max (") || !strings.Contains(st.Message(), "vs. 65536)") {
		t.Errorf("a publish over MaxReceiveBytes: %v, want ResourceExhausted saying \"larger than max\" with both sizes", err)
	}
	if err := publish("small", 1000); err != nil {
		t.Errorf("a publish under MaxReceiveBytes: %v", err)
	}
}
