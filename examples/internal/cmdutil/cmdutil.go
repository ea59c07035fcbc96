// Package cmdutil holds what the example commands share: klog's -v flag and
// a readiness probe over HTTP.
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
func ServeReadiness(addr string, check func() error, out io.Writer) (stop func(), err error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-health-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := check(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(lis); !errors.Is(err, http.ErrServerClosed) {
			klog.Background().Error(err, "readiness probe server failed")
		}
	}()
	fmt.Fprintf(out, "readiness probe on http://%s/readyz\n", lis.Addr())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}, nil
}
