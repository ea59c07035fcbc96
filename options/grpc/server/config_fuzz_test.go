package server_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/go-logr/logr"

	"github.com/workwire/sdk-go/options/grpc/server"
)

// FuzzLoadConfig feeds LoadConfig any file: a config or an error, never a
// panic. A config it loads validates, makes a server, and survives being
// written back as JSON and loaded again unchanged.
func FuzzLoadConfig(f *testing.F) {
	f.Add([]byte("heartbeatInterval: 15s\nqueueSize: 100\nqueueBytes: 1048576\nsourceID: kube\n"))
	f.Add([]byte(`{"keepAliveTime":"30s","minClientPingInterval":5,"authCacheTTL":"-1s","maxReceiveBytes":1024}`))
	f.Add([]byte("tls:\n  certFile: /nonexistent.pem\n  keyFile: /nonexistent.key\n"))
	f.Add([]byte("heartbeatInterval: -1\n"))
	f.Add([]byte("queueSize: -5\n"))
	f.Add([]byte("unknownField: 1\n"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "server.yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := server.LoadConfig(path)
		if err != nil {
			if !reflect.DeepEqual(cfg, server.Config{}) {
				t.Fatalf("LoadConfig failed (%v) and returned %+v", err, cfg)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("LoadConfig returned a config that does not validate: %v", err)
		}
		if _, err := server.New(cfg, server.WithLogger(logr.Discard())); err != nil {
			t.Fatalf("a loaded config made no server: %v", err)
		}
		out, err := json.Marshal(cfg)
		if err != nil {
			t.Fatalf("marshal %+v: %v", cfg, err)
		}
		if err := os.WriteFile(path, out, 0o600); err != nil {
			t.Fatal(err)
		}
		again, err := server.LoadConfig(path)
		if err != nil {
			t.Fatalf("the config written back (%s) does not load: %v", out, err)
		}
		if !reflect.DeepEqual(again, cfg) {
			t.Fatalf("the config changed on a round trip:\nloaded  %+v\nwritten %s\nreloaded %+v", cfg, out, again)
		}
	})
}
