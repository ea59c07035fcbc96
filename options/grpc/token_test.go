package grpc

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeClock is a settable clock for fileToken.now.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func writeToken(t *testing.T, path, content string, mtime time.Time) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	// An explicit modification time: a rewrite within the file system's
	// timestamp granularity must still count as a change.
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

func header(t *testing.T, f *fileToken) string {
	t.Helper()
	md, err := f.GetRequestMetadata(context.Background())
	if err != nil {
		t.Fatalf("GetRequestMetadata: %v", err)
	}
	return md["authorization"]
}

func TestFileToken(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "token")
	clock := &fakeClock{t: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)}
	mtime := clock.t
	f := newFileToken(path, true)
	f.now = clock.now

	// No file yet and no token so far: an error, not an empty header.
	if _, err := f.GetRequestMetadata(context.Background()); err == nil || !strings.Contains(err.Error(), "token file") {
		t.Fatalf("a missing token file: %v, want an error", err)
	}
	clock.advance(2 * tokenCheckInterval)
	writeToken(t, path, "  \n", mtime)
	if _, err := f.GetRequestMetadata(context.Background()); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("an empty token file: %v, want an error", err)
	}

	clock.advance(2 * tokenCheckInterval)
	mtime = mtime.Add(time.Second)
	writeToken(t, path, "first\n", mtime)
	if got := header(t, f); got != "Bearer first" {
		t.Fatalf("header %q, want the file's token trimmed", got)
	}

	// Within the check interval the file is not looked at.
	mtime = mtime.Add(time.Second)
	writeToken(t, path, "second", mtime)
	if got := header(t, f); got != "Bearer first" {
		t.Errorf("header %q within the check interval, want the cached token", got)
	}
	// After it, the change is seen.
	clock.advance(tokenCheckInterval)
	if got := header(t, f); got != "Bearer second" {
		t.Fatalf("header %q after rotation, want the new token", got)
	}
	// A rewrite of the same size with a new modification time is a change.
	clock.advance(tokenCheckInterval)
	mtime = mtime.Add(time.Second)
	writeToken(t, path, "third!", mtime)
	if got := header(t, f); got != "Bearer third!" {
		t.Fatalf("header %q after a same-size rotation, want the new token", got)
	}

	// Mid-rotation failures keep the last good token.
	for _, tc := range []struct {
		name  string
		spoil func()
	}{
		{"an emptied file", func() { writeToken(t, path, "", mtime.Add(time.Hour)) }},
		{"a removed file", func() { _ = os.Remove(path) }},
		{"an unreadable file", func() {
			_ = os.Remove(path)
			if err := os.Mkdir(path, 0o700); err != nil { // Stat works, ReadFile fails
				t.Fatal(err)
			}
		}},
	} {
		tc.spoil()
		clock.advance(tokenCheckInterval)
		if got := header(t, f); got != "Bearer third!" {
			t.Errorf("%s: header %q, want the last good token", tc.name, got)
		}
		_ = os.RemoveAll(path)
	}

	// And a good file afterwards is read again.
	clock.advance(tokenCheckInterval)
	writeToken(t, path, "fourth", mtime.Add(2*time.Hour))
	if got := header(t, f); got != "Bearer fourth" {
		t.Errorf("header %q after recovery, want the new token", got)
	}
	if !f.RequireTransportSecurity() || newFileToken(path, false).RequireTransportSecurity() {
		t.Error("RequireTransportSecurity does not follow requireTLS")
	}
}
