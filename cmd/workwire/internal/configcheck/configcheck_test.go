package configcheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every key a kind claims is one its loader reads: a file with the key
// and one no loader has gets an unknown-field error for the second only.
// The values tried are of every JSON kind, since a value of the wrong
// type stops a loader before it checks the keys.
func TestKindsReadTheirKeys(t *testing.T) {
	const control = "noSuchKeyAnywhere"
	for _, k := range kinds {
		for _, key := range k.keys {
			t.Run(k.name+"/"+key, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				for _, value := range []string{`"1"`, "1", "{}", "[]", "true", "null"} {
					path := filepath.Join(dir, "config.yaml")
					if err := os.WriteFile(path, []byte(key+": "+value+"\n"+control+": 1\n"), 0o600); err != nil {
						t.Fatal(err)
					}
					_, err := k.load(path)
					if err == nil || !strings.Contains(err.Error(), `unknown field "`+control+`"`) {
						continue // the value stopped it first
					}
					if strings.Contains(err.Error(), `unknown field "`+key+`"`) {
						t.Fatalf("the %s loader does not read %s: %v", k.name, key, err)
					}
					return
				}
				t.Fatalf("no value of %s got the %s loader to check the keys", key, k.name)
			})
		}
	}
}

// The type a file's keys tell, or why they tell none.
func TestInfer(t *testing.T) {
	for _, tc := range []struct {
		name, doc, kind string
		by              []string
		err             string
	}{
		{name: "mqtt", doc: "brokerHost: a:1\nqos: 1\n", kind: "mqtt", by: []string{"brokerHost", "qos"}},
		{name: "mqtt, a typo", doc: "brokerHost: a:1\nqoss: 1\n", kind: "mqtt", by: []string{"brokerHost"}},
		{name: "OCM's gRPC file", doc: "url: a:1\ncaFile: ca.pem\n", kind: "grpc", by: []string{"caFile", "url"}},
		{name: "NATS", doc: "url: nats://a:1\nstream: S\n", kind: "nats", by: []string{"stream"}},
		{name: "JSON", doc: `{"projectID": "p-123456"}`, kind: "pubsub", by: []string{"projectID"}},
		{name: "OCM's broker file", doc: "server_bind_port: 8090\n", kind: "broker", by: []string{"server_bind_port"}},
		{name: "url alone", doc: "url: a:1\n", err: "fit grpc and nats configs alike"},
		{name: "nothing known", doc: "foo: 1\n", err: "no config type has the key foo"},
		{name: "a list", doc: "- a\n- b\n", err: "no keys to tell its type by"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(path, []byte(tc.doc), 0o600); err != nil {
				t.Fatal(err)
			}
			k, by, err := infer(path)
			switch {
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("infer: %v, want an error saying %q", err, tc.err)
				}
			case err != nil:
				t.Errorf("infer: %v", err)
			case k.name != tc.kind || strings.Join(by, ",") != strings.Join(tc.by, ","):
				t.Errorf("infer: %s by %v, want %s by %v", k.name, by, tc.kind, tc.by)
			}
		})
	}
}
