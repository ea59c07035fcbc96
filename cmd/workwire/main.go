// Command workwire runs workwire's gRPC broker as a service and shows an
// operator what a fleet of sources and agents is doing: the events on a
// broker, what a hub still waits for, an event decoded, a config file
// checked.
//
//	workwire broker -config broker.yaml -kubeconfig hub.kubeconfig
//	workwire help
//
// Install it from a clone with `go -C cmd/workwire install .`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/workwire/sdk-go/cmd/workwire/internal/broker"
	"github.com/workwire/sdk-go/cmd/workwire/internal/cli"
	"github.com/workwire/sdk-go/cmd/workwire/internal/configcheck"
	"github.com/workwire/sdk-go/cmd/workwire/internal/decode"
	"github.com/workwire/sdk-go/cmd/workwire/internal/pendingcmd"
	"github.com/workwire/sdk-go/cmd/workwire/internal/tail"
)

func commands() []*cli.Command {
	return []*cli.Command{
		broker.Command(),
		decode.Command(),
		configcheck.Command(),
		pendingcmd.Command(),
		tail.Command(),
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := cli.Main(ctx, "workwire", commands(), cli.Stdio(), os.Args[1:])
	stop()
	os.Exit(code)
}
