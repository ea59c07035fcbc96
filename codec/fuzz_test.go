package codec

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
)

// addSeeds adds every testdata/protocol event, and the events the codecs encode
// from the test fixtures, to the corpus.
func addSeeds(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "protocol", "*.json"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seed files: %v", err)
	}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	for _, c := range []generic.Codec[*workv1.ManifestWork]{NewManifestBundleCodec(), NewManifestCodec()} {
		for _, e := range []struct {
			source string
			t      types.EventType
			work   *workv1.ManifestWork
		}{
			{testSource, eventType(c.DataType(), types.SubResourceSpec, types.UpdateRequest), specWork()},
			{testAgent, eventType(c.DataType(), types.SubResourceStatus, types.UpdateRequest), statusWork()},
		} {
			evt, err := c.Encode(e.source, e.t, e.work)
			if err != nil {
				f.Fatal(err)
			}
			raw, err := json.Marshal(evt)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(raw)
		}
	}
}

// fuzzDecode decodes any structured-mode event, also with every extension
// as a string, and re-encodes what it decoded. Errors are fine; panics are not.
func fuzzDecode(f *testing.F, c generic.Codec[*workv1.ManifestWork]) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		evt := cloudevents.New()
		if err := json.Unmarshal(raw, &evt); err != nil {
			return
		}
		events := []*cloudevents.Event{&evt}
		if s, err := stringify(&evt); err == nil {
			events = append(events, s)
		}
		for _, e := range events {
			work, err := generic.Decode(c, e)
			if err != nil {
				if work != nil {
					t.Fatalf("work and error %v", err)
				}
				continue
			}
			et, err := types.ParseEventType(e.Type())
			if err != nil {
				t.Fatalf("decoded an event of invalid type %q", e.Type())
			}
			if work.UID == "" {
				t.Fatalf("decoded a work without UID")
			}
			// What an agent decoded, a source may send on; what a source
			// decoded, an agent may report.
			et.DataType = c.DataType()
			work.Namespace = "cluster1"
			if work.Annotations == nil {
				work.Annotations = map[string]string{OriginalSourceAnnotation: "s"}
			}
			_, _ = c.Encode("s", et, work)
		}
	})
}

func FuzzManifestBundleDecode(f *testing.F) { fuzzDecode(f, NewManifestBundleCodec()) }

func FuzzManifestDecode(f *testing.F) { fuzzDecode(f, NewManifestCodec()) }
