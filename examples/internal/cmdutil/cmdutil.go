// Package cmdutil holds what the example commands share: klog's -v flag,
// serving a readiness probe or metrics over HTTP, and saying where the
// transports that are modules of their own run.
package cmdutil

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"k8s.io/klog/v2"
)

// Verbosity registers klog's -v on fs.
func Verbosity(fs *flag.FlagSet) {
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	fs.Var(klogFlags.Lookup("v").Value, "v", "log verbosity: 0 for what an operator needs (connection failures among them), 2 for every connect attempt, 4 for every event")
}

// UsageError is a command line a command cannot run with.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Parse parses args with fs, which says what is wrong on its output: a
// bad flag or an argument that is none is a UsageError; -h is
// flag.ErrHelp.
func Parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return UsageError{err}
	}
	if fs.NArg() > 0 {
		err := fmt.Errorf("unexpected arguments %q", fs.Args())
		fmt.Fprintln(fs.Output(), err)
		fs.Usage()
		return UsageError{err}
	}
	return nil
}

// Exit ends the command program after its run ended in err: 0 when err is
// nil or flag.ErrHelp, 2 for a UsageError (already said), and 1 for any
// other error, which it writes to stderr.
func Exit(program string, err error) {
	var usage UsageError
	switch {
	case err == nil || errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.As(err, &usage):
		os.Exit(2)
	default:
		fmt.Fprintf(os.Stderr, "%s: %v\n", program, err)
		os.Exit(1)
	}
}

// Transports are the -transport values of a command: MQTT, Kafka, gRPC
// and more.
func Transports(more ...string) []string {
	return append([]string{"mqtt", "kafka", "grpc"}, more...)
}

// UnknownTransport is the error of program (quickstart, bench) for
// -transport name, which is none of known. NATS and Pub/Sub are modules
// of their own, which the main module does not require; the module
// examples/brokers runs the commands over them.
func UnknownTransport(name, program string, known []string) error {
	if name == "nats" || name == "pubsub" {
		return fmt.Errorf("-transport %s: the %s transport is a Go module of its own; run it from the module examples/brokers: go -C examples/brokers run ./%s -transport %s",
			name, name, program, name)
	}
	return fmt.Errorf("unknown -transport %q (want %s)", name, strings.Join(known, ", "))
}

// ServeReadiness serves check at http://addr/readyz, as a Kubernetes
// readiness probe reads it: 200 "ok" while check returns nil, 503 with the
// error otherwise. It prints where it listens to out and serves until stop.
// An empty addr serves nothing (stop does nothing).
func ServeReadiness(addr string, check func() error, out io.Writer) (stop func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := check(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	return Serve(addr, "readiness probe", "/readyz", mux, out)
}

// Serve serves h on addr until stop, and prints to out that what (say,
// "metrics") is at http://<the address>/path: with a port of 0, the one
// the system chose.
func Serve(addr, what, path string, h http.Handler, out io.Writer) (stop func(), err error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(lis); !errors.Is(err, http.ErrServerClosed) {
			klog.Background().Error(err, "server failed", "serving", what)
		}
	}()
	fmt.Fprintf(out, "%s on http://%s%s\n", what, lis.Addr(), path)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}, nil
}
