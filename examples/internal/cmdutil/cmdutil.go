// Package cmdutil holds what the example commands share: klog's -v flag,
// and serving a readiness probe or metrics over HTTP.
package cmdutil

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"k8s.io/klog/v2"
)

// Verbosity registers klog's -v on fs.
func Verbosity(fs *flag.FlagSet) {
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	fs.Var(klogFlags.Lookup("v").Value, "v", "log verbosity: 0 for what an operator needs (connection failures among them), 2 for every connect attempt, 4 for every event")
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
