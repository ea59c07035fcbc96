package types

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var bundles = DataType{Group: "io.open-cluster-management.works", Version: "v1alpha1", Resource: "manifestbundles"}

func TestParseEventType(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    EventType
		wantErr string
	}{
		{in: "io.open-cluster-management.works.v1alpha1.manifestbundles.spec.create_request",
			want: EventType{DataType: bundles, SubResource: SubResourceSpec, Action: CreateRequest}},
		{in: "io.open-cluster-management.works.v1alpha1.manifest.status.update_request",
			want: EventType{DataType: DataType{"io.open-cluster-management.works", "v1alpha1", "manifest"}, SubResource: SubResourceStatus, Action: UpdateRequest}},
		{in: "a.v1.things.spec.resync_request",
			want: EventType{DataType: DataType{"a", "v1", "things"}, SubResource: SubResourceSpec, Action: ResyncRequest}},
		// What OCM peers answer resyncs with.
		{in: "io.open-cluster-management.works.v1alpha1.manifestbundles.spec.resync_response",
			want: EventType{DataType: bundles, SubResource: SubResourceSpec, Action: ResyncResponse}},
		{in: "io.open-cluster-management.works.v1alpha1.manifestbundles.status.resync_response",
			want: EventType{DataType: bundles, SubResource: SubResourceStatus, Action: ResyncResponse}},
		{in: "", wantErr: "want <group>"},
		{in: "spec.create_request", wantErr: "want <group>"},
		{in: "v1.things.spec.create_request", wantErr: "want <group>"},
		{in: "a.v1.things.spec.explode", wantErr: `unknown action "explode"`},
		{in: "a.v1.things.Spec.create_request", wantErr: `unknown subresource "Spec"`},
		{in: "a..things.spec.create_request", wantErr: "version: empty part"},
		{in: "a.v1.THINGS.spec.create_request", wantErr: `resource: "THINGS" has character 'T'`},
		{in: ".v1.things.spec.create_request", wantErr: "group"},
		{in: "a b.v1.things.spec.create_request", wantErr: "group"},
		{in: "io..works.v1.things.spec.create_request", wantErr: "group: empty part"},
		{in: "io.works..v1.things.spec.create_request", wantErr: "group: empty part"},
		{in: "io.Works.v1.things.spec.create_request", wantErr: `group: "io.Works" has character 'W'`},
		{in: "a.v1.things.status.bogus\x00", wantErr: "unknown action"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseEventType(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrInvalidType) {
					t.Fatalf("ParseEventType(%q) error = %v, want one containing %q wrapping ErrInvalidType", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("(-want +got)\n%s", diff)
			}
			if got.String() != tt.in {
				t.Fatalf("String() = %q, want %q", got.String(), tt.in)
			}
		})
	}
}

func TestDataTypeSingular(t *testing.T) {
	t.Parallel()
	if got := bundles.Singular().Resource; got != "manifestbundle" {
		t.Fatalf("Singular = %q", got)
	}
	d, err := ParseDataType("io.open-cluster-management.works.v1alpha1.manifests")
	if err != nil || d.Resource != "manifests" || d.Group != "io.open-cluster-management.works" {
		t.Fatalf("ParseDataType = %+v, %v", d, err)
	}
	if _, err := ParseDataType("nodots"); err == nil {
		t.Fatal("ParseDataType(nodots) succeeded")
	}
}

func TestIntExtensions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		value   any
		want    int64
		wantErr string
	}{
		{"integer", int32(7), 7, ""},
		{"decimal string", "42", 42, ""},
		{"big decimal string", "9007199254740993", 9007199254740993, ""},
		{"junk", "abc", 0, "want a decimal integer"},
		{"fraction string", "1.5", 0, "want a decimal integer"},
		{"overflow", "99999999999999999999", 0, "out of range"},
		{"bool", true, 0, "want an integer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			evt := cloudevents.New()
			evt.SetID("e1")
			evt.SetExtension(ExtResourceVersion, tt.value)
			got, err := RequiredInt64(&evt, ExtResourceVersion)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrExtension) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %d, %v; want %d", got, err, tt.want)
			}
		})
	}
	evt := cloudevents.New()
	if _, err := RequiredInt64(&evt, ExtResourceVersion); !IsMissing(err) {
		t.Fatalf("absent extension: %v, want a missing error", err)
	}
	if err := SetInt32Extension(&evt, ExtResourceVersion, math.MaxInt32+1); err == nil {
		t.Fatal("SetInt32Extension accepted a value beyond 32 bits")
	}
	if err := SetInt32Extension(&evt, ExtResourceVersion, 5); err != nil {
		t.Fatal(err)
	}
	if evt.Extensions()[ExtResourceVersion] != int32(5) {
		t.Fatalf("stored %T", evt.Extensions()[ExtResourceVersion])
	}
}

func TestTimeExtension(t *testing.T) {
	t.Parallel()
	evt := cloudevents.New()
	now := time.Date(2023, 7, 19, 3, 3, 46, 841308779, time.FixedZone("x", 3600))
	SetTimeExtension(&evt, ExtDeletionTimestamp, now)
	got, ok, err := TimeExtension(&evt, ExtDeletionTimestamp)
	if err != nil || !ok || !got.Equal(now) || got.Location() != time.UTC {
		t.Fatalf("got %v %v %v", got, ok, err)
	}
	evt.SetExtension(ExtDeletionTimestamp, "2023-07-19T03:03:46.841308779Z")
	if got, _, err := TimeExtension(&evt, ExtDeletionTimestamp); err != nil || got.Nanosecond() != 841308779 {
		t.Fatalf("string form: %v %v", got, err)
	}
	evt.SetExtension(ExtDeletionTimestamp, "yesterday")
	if _, _, err := TimeExtension(&evt, ExtDeletionTimestamp); err == nil {
		t.Fatal("accepted a non-RFC 3339 time")
	}
}

func TestResyncPayloads(t *testing.T) {
	t.Parallel()
	// Seed 000 shows resourceVersion as a string; we emit numbers. Accept both.
	l, err := DecodeResourceVersionList([]byte(`{"resourceVersions":[{"resourceID":"a","resourceVersion":"3"},{"resourceID":"b","resourceVersion":4}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []ResourceVersion{{ResourceID: "a", ResourceVersion: 3}, {ResourceID: "b", ResourceVersion: 4}}
	if diff := cmp.Diff(want, l.ResourceVersions); diff != "" {
		t.Fatal(diff)
	}
	// An entry may name its own source; an entry's source is its own, or the
	// event's.
	l, err = DecodeResourceVersionList([]byte(`{"resourceVersions":[{"resourceID":"a","resourceVersion":3,"originalSource":"hub2"},{"resourceID":"b","resourceVersion":4}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := []string{l.ResourceVersions[0].EntrySource("hub1"), l.ResourceVersions[1].EntrySource("hub1"), l.ResourceVersions[1].EntrySource("")}; !slices.Equal(got, []string{"hub2", "hub1", ""}) {
		t.Errorf("entry sources %q", got)
	}
	for _, bad := range []string{
		`{"resourceVersions":[{"resourceID":"a","resourceVersion":"x"}]}`,
		`{"resourceVersions":[{"resourceVersion":1}]}`,
		`{"resourceVersions":[{"resourceID":"a","resourceVersion":1.5}]}`,
		`{"resourceVersions":{}}`,
		`[`,
	} {
		if _, err := DecodeResourceVersionList([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
	if l, err := DecodeResourceVersionList(nil); err != nil || len(l.ResourceVersions) != 0 {
		t.Fatalf("empty payload: %v %v", l, err)
	}
	h, err := DecodeStatusHashList([]byte(`{"statusHashes":[{"resourceID":"a","statusHash":"h"}]}`))
	if err != nil || len(h.StatusHashes) != 1 {
		t.Fatalf("%v %v", h, err)
	}
	if _, err := DecodeStatusHashList([]byte(`{"statusHashes":[{"statusHash":"h"}]}`)); err == nil {
		t.Fatal("accepted an entry without resourceID")
	}
	out, _ := json.Marshal(ResourceVersionList{ResourceVersions: want})
	if string(out) != `{"resourceVersions":[{"resourceID":"a","resourceVersion":3},{"resourceID":"b","resourceVersion":4}]}` {
		t.Fatalf("encoded %s", out)
	}
}

func TestBatches(t *testing.T) {
	t.Parallel()
	entries := make([]ResourceVersion, 2500)
	for i := range entries {
		entries[i] = ResourceVersion{ResourceID: fmt.Sprintf("%036d", i), ResourceVersion: int64(i)}
	}
	// No known limit: one batch, however large.
	if got := Batches(entries, BatchBytes(0), ResourceVersionSize); len(got) != 1 || len(got[0]) != len(entries) {
		t.Fatalf("without a limit: %d batches", len(got))
	}
	// A limit: batches whose encoded entries fit it with room for the envelope.
	const limit = 64 << 10
	got := Batches(entries, BatchBytes(limit), ResourceVersionSize)
	total := 0
	for _, b := range got {
		total += len(b)
		data, _ := json.Marshal(ResourceVersionList{ResourceVersions: b})
		if len(data) > limit-ResyncEnvelopeBytes {
			t.Fatalf("batch of %d bytes, limit %d", len(data), limit)
		}
	}
	if len(got) < 3 || total != len(entries) {
		t.Fatalf("%d entries in %d batches", total, len(got))
	}
	// An entry larger than the budget has a batch of its own.
	long := []StatusHash{{ResourceID: "a"}, {ResourceID: strings.Repeat("x", 5000)}, {ResourceID: "b"}}
	if got := Batches(long, 1000, StatusHashSize); len(got) != 3 {
		t.Fatalf("an oversize entry: %d batches, want 3", len(got))
	}
	if b := Batches[int](nil, 0, func(int) int { return 1 }); len(b) != 0 {
		t.Fatalf("no entries gave %d batches", len(b))
	}
	if got := BatchBytes(6 << 10); got != 3<<10 {
		t.Errorf("BatchBytes(6 KiB) = %d, want half", got)
	}
}

func FuzzParseEventType(f *testing.F) {
	for _, s := range []string{
		"io.open-cluster-management.works.v1alpha1.manifestbundles.spec.create_request",
		"a.v1.b.status.resync_request", "", "....", "a.b.c.d.e.f.g",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		et, err := ParseEventType(s)
		if err != nil {
			return
		}
		again, err := ParseEventType(et.String())
		if err != nil || again != et {
			t.Fatalf("round trip of %q: %v %v", s, again, err)
		}
	})
}

func FuzzDecodeResyncPayloads(f *testing.F) {
	f.Add([]byte(`{"resourceVersions":[{"resourceID":"a","resourceVersion":"3"}]}`))
	f.Add([]byte(`{"statusHashes":[{"resourceID":"a","statusHash":"h"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		// Whatever decodes encodes again and decodes to the same list: the
		// payload a client sends after reading one is the one it read.
		if rv, err := DecodeResourceVersionList(data); err == nil {
			again, err := DecodeResourceVersionList(mustMarshal(t, rv))
			if err != nil || !cmp.Equal(normalVersions(again), normalVersions(rv)) {
				t.Fatalf("resource versions of %q: %+v, then %+v (%v)", data, rv, again, err)
			}
		}
		if sh, err := DecodeStatusHashList(data); err == nil {
			again, err := DecodeStatusHashList(mustMarshal(t, sh))
			if err != nil || !cmp.Equal(normalHashes(again), normalHashes(sh)) {
				t.Fatalf("status hashes of %q: %+v, then %+v (%v)", data, sh, again, err)
			}
		}
	})
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %+v: %v", v, err)
	}
	return b
}

// normalVersions and normalHashes treat a nil and an empty list as one:
// both mean "send everything".
func normalVersions(l ResourceVersionList) []ResourceVersion {
	if len(l.ResourceVersions) == 0 {
		return nil
	}
	return l.ResourceVersions
}

func normalHashes(l StatusHashList) []StatusHash {
	if len(l.StatusHashes) == 0 {
		return nil
	}
	return l.StatusHashes
}

func BenchmarkParseEventType(b *testing.B) {
	s := "io.open-cluster-management.works.v1alpha1.manifestbundles.status.update_request"
	b.ReportAllocs()
	for range b.N {
		if _, err := ParseEventType(s); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzFastResyncDecoders checks the fast resync decoders against
// encoding/json: whatever a fast path accepts, encoding/json decodes to the
// same list.
func FuzzFastResyncDecoders(f *testing.F) {
	f.Add([]byte(`{"resourceVersions":[{"resourceID":"a","resourceVersion":3},{"resourceID":"b","resourceVersion":"4"}]}`))
	f.Add([]byte(` { "statusHashes" : [ { "resourceID" : "a" , "statusHash" : "h" } , {"statusHash":"","resourceID":"b"} ] } `))
	f.Add([]byte(`{"statusHashes":[]}`))
	f.Add([]byte(`{"statusHashes":[{"resourceID":"a","resourceID":"b"}]}`))
	f.Add([]byte(`{"resourceVersions":[{"resourceID":"a","resourceVersion":-0}]}`))
	f.Add([]byte(`{"resourceVersions":[{"resourceID":5,"resourceVersion":1}]}`))
	f.Add([]byte(`{"statusHashes":[{"resourceID":"a","statusHash":7}]}`))
	f.Add([]byte(`{"resourceVersions":[{"resourceID":"a","resourceVersion":3,"originalSource":"hub1"},{"originalSource":"","resourceID":"b","resourceVersion":4}]}`))
	f.Add([]byte(`{"resourceVersions":[{"resourceID":"a","resourceVersion":3,"originalSource":1}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if fast, ok := fastStatusHashes(data); ok {
			var slow StatusHashList
			if err := json.Unmarshal(data, &slow); err != nil {
				t.Fatalf("fast status hashes of %q: %+v; encoding/json: %v", data, fast, err)
			}
			if !cmp.Equal(normalHashes(fast), normalHashes(slow)) {
				t.Fatalf("status hashes of %q: fast %+v, encoding/json %+v", data, fast, slow)
			}
		}
		if fast, ok := fastResourceVersions(data); ok {
			var slow ResourceVersionList
			if err := json.Unmarshal(data, &slow); err != nil {
				t.Fatalf("fast resource versions of %q: %+v; encoding/json: %v", data, fast, err)
			}
			if !cmp.Equal(normalVersions(fast), normalVersions(slow)) {
				t.Fatalf("resource versions of %q: fast %+v, encoding/json %+v", data, fast, slow)
			}
		}
	})
}

func BenchmarkDecodeStatusHashList1000(b *testing.B) {
	l := StatusHashList{}
	for i := range 1000 {
		l.StatusHashes = append(l.StatusHashes, StatusHash{ResourceID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), StatusHash: strings.Repeat("ab", 32)})
	}
	data, _ := json.Marshal(l)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeStatusHashList(data); err != nil {
			b.Fatal(err)
		}
	}
}

func TestSequenceID(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		value   any
		want    uint64
		ok      bool
		wantErr bool
	}{
		{name: "absent"},
		{name: "decimal string", value: "18446744073709551615", want: math.MaxUint64, ok: true},
		{name: "integer", value: int32(7), want: 7, ok: true},
		{name: "negative integer", value: int32(-1), wantErr: true},
		{name: "not a number", value: "7a", wantErr: true},
		{name: "over 64 bits", value: "18446744073709551616", wantErr: true},
		{name: "a boolean", value: true, wantErr: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			evt := cloudevents.New()
			evt.SetID("e1")
			if tt.value != nil {
				evt.SetExtension(ExtSequenceID, tt.value)
			}
			got, ok, err := SequenceID(&evt)
			if (err != nil) != tt.wantErr || got != tt.want || ok != tt.ok {
				t.Errorf("SequenceID = %d, %v, %v; want %d, %v, error %v", got, ok, err, tt.want, tt.ok, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrExtension) {
				t.Errorf("error %v does not wrap ErrExtension", err)
			}
		})
	}
}

func TestParseHeader(t *testing.T) {
	t.Parallel()
	deleted := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	evt := cloudevents.New()
	evt.SetID("e1")
	evt.SetType(bundles.String() + ".status.update_request")
	evt.SetExtension(ExtResourceID, "w1")
	evt.SetExtension(ExtResourceVersion, "12")
	evt.SetExtension(ExtClusterName, "c1")
	evt.SetExtension(ExtOriginalSource, "hub")
	SetTimeExtension(&evt, ExtDeletionTimestamp, deleted)
	evt.SetExtension(ExtSequenceID, "1234")
	got, err := ParseHeader(&evt)
	if err != nil {
		t.Fatal(err)
	}
	want := Header{
		Type:       EventType{DataType: bundles, SubResource: SubResourceStatus, Action: UpdateRequest},
		ResourceID: "w1", Version: 12, HasVersion: true, ClusterName: "c1", OriginalSource: "hub",
		Deletion: deleted, HasDeletion: true, Sequence: 1234, HasSequence: true,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}

	// An empty version is none: OCM's peers send one for an object no
	// kube-apiserver has stored yet.
	evt.SetExtension(ExtResourceVersion, "")
	if got, err := ParseHeader(&evt); err != nil || got.HasVersion {
		t.Errorf("empty resourceversion: %+v, %v; want no version", got, err)
	}

	// Of two bad extensions, the one of Header's first field is reported,
	// every time.
	evt.SetExtension(ExtSequenceID, "x")
	evt.SetExtension(ExtClusterName, true)
	for range 20 {
		_, err := ParseHeader(&evt)
		if ee := (*ExtensionError)(nil); !errors.As(err, &ee) || ee.Name != ExtClusterName || !strings.Contains(err.Error(), "want a string, got bool") {
			t.Fatalf("error %v, want one for %s", err, ExtClusterName)
		}
	}
	evt.SetType("not.a.type")
	if _, err := ParseHeader(&evt); !errors.Is(err, ErrInvalidType) {
		t.Errorf("bad type: %v, want ErrInvalidType", err)
	}
}

func BenchmarkParseHeader(b *testing.B) {
	evt := cloudevents.New()
	evt.SetID("e1")
	evt.SetType(bundles.String() + ".status.update_request")
	evt.SetExtension(ExtResourceID, "5b3a7cd2-5d7a-4b8e-9e0c-0f6c2d6b1d4e")
	evt.SetExtension(ExtResourceVersion, "12")
	evt.SetExtension(ExtClusterName, "cluster1")
	evt.SetExtension(ExtOriginalSource, "hub")
	evt.SetExtension(ExtSequenceID, "1834567890123456789")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseHeader(&evt); err != nil {
			b.Fatal(err)
		}
	}
}
