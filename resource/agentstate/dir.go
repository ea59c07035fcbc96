package agentstate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// Dir is a Store of files in one directory, one per object: NAME.json
// (the name escaped as a URL path segment; #HASH.json for a name too long
// for a file), whose first line is the name and the rest the entry. Each
// is written whole to a temporary file, synced and renamed over the old
// one, so a reader finds either the old entry or the new one, never part
// of either. It suits an
// agent whose directory outlives its process (a persistent volume, a
// host path); on Kubernetes, Secrets lives as long as the cluster instead.
// It is goroutine-safe.
type Dir struct {
	path string
}

var _ Store = (*Dir)(nil)

// entrySuffix ends every entry's file name; temporary files have none.
const entrySuffix = ".json"

// NewDir returns the Store of the directory at path, which it creates
// (mode 0700: entries hold what sources sent) if it is missing.
func NewDir(path string) (*Dir, error) {
	if path == "" {
		return nil, errors.New("agent state directory: the path is empty")
	}
	if err := os.MkdirAll(path, 0o700); err != nil {
		return nil, fmt.Errorf("agent state directory: %w", err)
	}
	return &Dir{path: path}, nil
}

// Path returns the directory's path.
func (d *Dir) Path() string { return d.path }

// Load implements Store. Temporary files left by a process that died
// while writing are removed.
func (d *Dir) Load(context.Context) (map[string][]byte, error) {
	files, err := os.ReadDir(d.path)
	if err != nil {
		return nil, fmt.Errorf("agent state directory: %w", err)
	}
	out := make(map[string][]byte, len(files))
	for _, f := range files {
		fn := f.Name()
		if !f.Type().IsRegular() {
			continue
		}
		if !strings.HasSuffix(fn, entrySuffix) {
			if strings.HasPrefix(fn, tempPrefix) {
				_ = os.Remove(filepath.Join(d.path, fn))
			}
			continue
		}
		data, err := os.ReadFile(filepath.Join(d.path, fn))
		if err != nil {
			return nil, fmt.Errorf("agent state directory: %w", err)
		}
		name, entry, ok := bytes.Cut(data, []byte("\n"))
		if !ok || d.file(string(name)) != filepath.Join(d.path, fn) {
			return nil, fmt.Errorf("agent state directory: file %s is not an entry of its own name", fn)
		}
		out[string(name)] = entry
	}
	return out, nil
}

// tempPrefix starts the name of a file being written.
const tempPrefix = ".tmp-"

// Put implements Store: it returns once the entry's file and its name in
// the directory are synced to disk.
func (d *Dir) Put(_ context.Context, name string, data []byte) error {
	if strings.Contains(name, "\n") {
		return fmt.Errorf("agent state directory: put %q: a name has no line break", name)
	}
	f, err := os.CreateTemp(d.path, tempPrefix)
	if err != nil {
		return fmt.Errorf("agent state directory: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(append(append([]byte(name), '\n'), data...))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, d.file(name))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("agent state directory: put %s: %w", name, err)
	}
	return d.syncDir()
}

// Delete implements Store.
func (d *Dir) Delete(_ context.Context, name string) error {
	if err := os.Remove(d.file(name)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("agent state directory: delete %s: %w", name, err)
	}
	return d.syncDir()
}

// maxFileName is the longest file name most file systems take.
const maxFileName = 255

// file is the path of the entry of name: the name as it is, escaped, where
// that fits; else its hash, after a '#' that no escaped name has.
func (d *Dir) file(name string) string {
	fn := url.PathEscape(name) + entrySuffix
	if len(fn) > maxFileName {
		sum := sha256.Sum256([]byte(name))
		fn = "#" + hex.EncodeToString(sum[:]) + entrySuffix
	}
	return filepath.Join(d.path, fn)
}

// syncDir syncs the directory, so a rename or removal in it survives a
// crash of the machine, not only of the process.
func (d *Dir) syncDir() error {
	f, err := os.Open(d.path)
	if err != nil {
		return fmt.Errorf("agent state directory: %w", err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("agent state directory: sync: %w", err)
	}
	return nil
}
