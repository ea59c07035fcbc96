package codec

import (
	"testing"

	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
)

// The benchmarks use specWork (a ~2 KB Deployment with labels, annotations,
// resources, env and probes, a feedback rule and an update strategy) and
// statusWork (Applied/Available conditions on the work and the manifest, and
// Integer, String, Boolean and JsonRaw feedback values).

func benchEncode(b *testing.B, c generic.Codec[*workv1.ManifestWork], sub types.SubResource, work *workv1.ManifestWork) {
	t := eventType(c.DataType(), sub, types.UpdateRequest)
	source := testSource
	if sub == types.SubResourceStatus {
		source = testAgent
	}
	evt, err := c.Encode(source, t, work)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(evt.Data())))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.Encode(source, t, work); err != nil {
			b.Fatal(err)
		}
	}
}

func benchDecode(b *testing.B, c generic.Codec[*workv1.ManifestWork], sub types.SubResource, work *workv1.ManifestWork) {
	source := testSource
	if sub == types.SubResourceStatus {
		source = testAgent
	}
	evt, err := c.Encode(source, eventType(c.DataType(), sub, types.UpdateRequest), work)
	if err != nil {
		b.Fatal(err)
	}
	// Decode what arrives over the wire: extensions as the structured JSON
	// format delivers them.
	evt = viaStructuredJSON(b, evt)
	b.SetBytes(int64(len(evt.Data())))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := generic.Decode(c, evt); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkManifestBundleEncodeSpec(b *testing.B) {
	benchEncode(b, NewManifestBundleCodec(), types.SubResourceSpec, specWork())
}

func BenchmarkManifestBundleDecodeSpec(b *testing.B) {
	benchDecode(b, NewManifestBundleCodec(), types.SubResourceSpec, specWork())
}

func BenchmarkManifestBundleEncodeStatus(b *testing.B) {
	benchEncode(b, NewManifestBundleCodec(), types.SubResourceStatus, statusWork())
}

func BenchmarkManifestBundleDecodeStatus(b *testing.B) {
	benchDecode(b, NewManifestBundleCodec(), types.SubResourceStatus, statusWork())
}

func BenchmarkManifestEncodeSpec(b *testing.B) {
	benchEncode(b, NewManifestCodec(), types.SubResourceSpec, specWork())
}

func BenchmarkManifestDecodeSpec(b *testing.B) {
	benchDecode(b, NewManifestCodec(), types.SubResourceSpec, specWork())
}

func BenchmarkManifestEncodeStatus(b *testing.B) {
	benchEncode(b, NewManifestCodec(), types.SubResourceStatus, statusWork())
}

func BenchmarkManifestDecodeStatus(b *testing.B) {
	benchDecode(b, NewManifestCodec(), types.SubResourceStatus, statusWork())
}

// BenchmarkManifestBundleDecodeSpecMQTT decodes a spec event whose
// extensions are all strings, as the MQTT binding delivers them.
func BenchmarkManifestBundleDecodeSpecMQTT(b *testing.B) {
	c := NewManifestBundleCodec()
	evt, err := c.Encode(testSource, eventType(c.DataType(), types.SubResourceSpec, types.UpdateRequest), specWork())
	if err != nil {
		b.Fatal(err)
	}
	evt = viaStrings(b, evt)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := generic.Decode(c, evt); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStatusHash is the hash status resync compares, for a work with
// conditions and feedback values: the source computes it for every work it
// holds, the agent for every work a resync request names.
func BenchmarkStatusHash(b *testing.B) {
	w := statusWork()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := StatusHash(w); err != nil {
			b.Fatal(err)
		}
	}
}
