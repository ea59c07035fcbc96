// Package control is how the harness drives the fleet's processes: each
// serves JSON over HTTP on a loopback port of its own and writes where to
// a file the harness names; the harness waits for the file and calls it.
package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"strings"
	"time"
)

// Serve serves mux on a free port of 127.0.0.1 and writes its address to
// the file at path, until stop.
func Serve(path string, mux http.Handler) (stop func(), err error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	// Written whole, then renamed: the harness never reads half of it.
	err = os.WriteFile(path+".tmp", []byte(lis.Addr().String()), 0o644)
	if err == nil {
		err = os.Rename(path+".tmp", path)
	}
	if err != nil {
		_ = srv.Close()
		<-done
		return nil, err
	}
	return func() { _ = srv.Close(); <-done }, nil
}

// WithProfiles adds Go's profiles to mux, at /debug/pprof/ (go tool pprof
// http://<control address>/debug/pprof/heap), for finding where a part's
// memory and CPU go.
func WithProfiles(mux *http.ServeMux) *http.ServeMux {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	return mux
}

// Run serves mux as Serve does until ctx ends.
func Run(ctx context.Context, path string, mux http.Handler) error {
	stop, err := Serve(path, mux)
	if err != nil {
		return err
	}
	<-ctx.Done()
	stop()
	return nil
}

// Handle returns a handler that decodes the request's JSON body (if any)
// into a new In, calls f and answers with its result as JSON, or 500 and
// the error.
func Handle[In, Out any](f func(context.Context, In) (Out, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in In
		if r.ContentLength != 0 {
			if err := json.NewDecoder(r.Body).Decode(&in); err != nil && !errors.Is(err, io.EOF) {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
		}
		out, err := f(r.Context(), in)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
}

// Client calls a process's control port.
type Client struct{ addr string }

// Await waits for the file at path that Serve writes, until ctx ends or
// exited returns an error (the process ended before it served).
func Await(ctx context.Context, path string, exited func() error) (*Client, error) {
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			return &Client{addr: strings.TrimSpace(string(b))}, nil
		}
		if err := exited(); err != nil {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for %s: %w", path, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Call posts in as JSON to path and decodes the answer into out (if not
// nil).
func (c *Client) Call(ctx context.Context, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+c.addr+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return fmt.Errorf("%s: %s: %s", path, resp.Status, strings.TrimSpace(string(msg)))
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s: decode the answer: %w", path, err)
	}
	return nil
}
