package grpctest_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc"
	"github.com/workwire/sdk-go/options/grpc/grpctest"
	"github.com/workwire/sdk-go/options/transporttest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStopStartRestartAndSendRaw(t *testing.T) {
	srv := grpctest.NewServer(t)
	tr, err := grpc.New(srv.Config(), grpc.WithLogger(logr.Discard()))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close(context.Background())
	r := transporttest.NewRecorder()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.Start(ctx, options.AgentSubscriptions("c1", nil), r); err != nil {
		t.Fatal(err)
	}
	route := options.Route{Role: options.RoleSpec, Source: "s", Cluster: "c1"}
	if n := srv.SendRaw(route, []byte("garbage")); n != 1 {
		t.Fatalf("SendRaw reached %d subscribers", n)
	}
	r.Wait(t, "the malformed event reported", 10*time.Second, func() bool { return r.MalformedCount() == 1 })

	srv.Stop()
	srv.Stop() // idempotent
	if srv.Server().Subscribers() != 0 {
		t.Error("subscribers left after Stop")
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	r.Wait(t, "resubscribed after Start", 10*time.Second, func() bool { return r.Connects() == 2 })
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	r.Wait(t, "resubscribed after Restart", 10*time.Second, func() bool { return r.Connects() == 3 })
}
