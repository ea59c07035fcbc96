package decode

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// No input makes a decoder panic: read reports a panic as an error,
// which would hide one, so the fuzzer fails on it.
func FuzzRead(f *testing.F) {
	for _, seed := range []string{
		`{"specversion":"1.0","id":"1","source":"hub1","type":"io.open-cluster-management.works.v1alpha1.manifestbundles.spec.create_request","resourceid":"u","resourceversion":1,"data":{"manifests":[]}}`,
		"ce-specversion: 1.0\nce-id: 1\nce-source: hub1\nce-type: io.open-cluster-management.works.v1alpha1.manifests.status.update_request\nce-resourceid: u\ncontent-type: application/json\n\n{}",
		"HTTP/1.1 200 OK\ncontent-type: application/cloudevents+json\n\n{\"specversion\":\"1.0\"}",
		"specversion: 0.3\nid: 1\nsource: s\ntype: t\n",
		"\x0a\x01\x31\x12\x04hub1\x1a\x031.0\x22\x01t",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, mode := range modes {
			evt, err := read(data, mode)
			if err != nil && strings.Contains(err.Error(), "decoder panic") {
				t.Fatalf("%s: %v", mode, err)
			}
			if err == nil {
				_ = check(evt)
			}
		}
	})
}
