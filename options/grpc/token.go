package grpc

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"
)

// tokenCheckInterval is how often a token file is checked for a change.
const tokenCheckInterval = time.Second

// staticToken is per-RPC credentials that send one bearer token.
type staticToken struct {
	token      string
	requireTLS bool
}

var _ credentials.PerRPCCredentials = staticToken{}

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (s staticToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + strings.TrimSpace(s.token)}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials.
func (s staticToken) RequireTransportSecurity() bool { return s.requireTLS }

// fileToken is per-RPC credentials that send the bearer token a file holds,
// re-reading the file when its size or modification time changes.
type fileToken struct {
	path       string
	requireTLS bool
	now        func() time.Time

	mu      sync.Mutex
	token   string
	checked time.Time
	modTime time.Time
	size    int64
}

var _ credentials.PerRPCCredentials = (*fileToken)(nil)

func newFileToken(path string, requireTLS bool) *fileToken {
	return &fileToken{path: path, requireTLS: requireTLS, now: time.Now}
}

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (f *fileToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	tok, err := f.get()
	if err != nil {
		return nil, err
	}
	return map[string]string{"authorization": "Bearer " + tok}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials.
func (f *fileToken) RequireTransportSecurity() bool { return f.requireTLS }

func (f *fileToken) get() (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	if f.token != "" && now.Sub(f.checked) < tokenCheckInterval {
		return f.token, nil
	}
	f.checked = now
	fi, err := os.Stat(f.path)
	if err != nil {
		if f.token != "" {
			return f.token, nil // mid-rotation: keep the last good token
		}
		return "", fmt.Errorf("grpc: token file: %w", err)
	}
	if f.token != "" && fi.ModTime().Equal(f.modTime) && fi.Size() == f.size {
		return f.token, nil
	}
	data, err := os.ReadFile(f.path)
	if err != nil {
		if f.token != "" {
			return f.token, nil
		}
		return "", fmt.Errorf("grpc: token file: %w", err)
	}
	tok := strings.TrimSpace(string(data))
	if tok == "" {
		if f.token != "" {
			return f.token, nil
		}
		return "", fmt.Errorf("grpc: token file %s is empty", f.path)
	}
	f.token, f.modTime, f.size = tok, fi.ModTime(), fi.Size()
	return tok, nil
}
