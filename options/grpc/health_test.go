package grpc_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc"
	"github.com/workwire/sdk-go/options/grpc/grpctest"
	"github.com/workwire/sdk-go/options/transporttest"
)

// A server that is not there is a failed attempt as soon as the channel
// fails to connect, with its reason, not at the end of a long handshake
// timeout: Healthy (and the log) say "connection refused" while Start
// still waits.
func TestADeadServerFailsEachAttemptAtOnce(t *testing.T) {
	tr := newTransport(t, grpc.Config{ServerAddress: transporttest.ClosedAddr(t), DialTimeout: options.Duration(time.Hour)})
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan error, 1)
	go func() {
		started <- tr.Start(ctx, options.AgentSubscriptions("cluster1", []string{"io.example.v1.things"}), transporttest.NewRecorder())
	}()
	defer func() {
		cancel()
		<-started
		_ = tr.Close(context.Background())
	}()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		err := tr.Healthy()
		if errors.Is(err, options.ErrNotConnected) && strings.Contains(err.Error(), "connection refused") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Healthy: %v; want it to report the refused connection", err)
		}
	}
}

// Healthy follows the subscription: nil while it is up, an error once the
// server is gone, nil again after the transport resubscribed.
func TestHealthFollowsTheServer(t *testing.T) {
	srv := grpctest.NewServer(t)
	tr := newTransport(t, srv.Config())
	recv := transporttest.NewRecorder()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := tr.Start(ctx, options.AgentSubscriptions("cluster1", []string{"io.example.v1.things"}), recv); err != nil {
		t.Fatal(err)
	}
	defer tr.Close(context.Background())
	if err := tr.Healthy(); err != nil {
		t.Fatalf("Healthy after Start: %v", err)
	}
	srv.Stop()
	recv.Wait(t, "Healthy to report the stopped server", 20*time.Second, func() bool { return errors.Is(tr.Healthy(), options.ErrNotConnected) })
	connects := recv.Connects()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	recv.Wait(t, "the transport to resubscribe", 20*time.Second, func() bool { return recv.Connects() > connects })
	if err := tr.Healthy(); err != nil {
		t.Errorf("Healthy after resubscribing: %v", err)
	}
}
