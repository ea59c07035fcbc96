package codec_test

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
)

// A source encodes a work as a spec event; the agent decodes it, applies it,
// and reports its status back to the source it came from.
func ExampleNewManifestBundleCodec() {
	c := codec.NewManifestBundleCodec()

	// Source side.
	work := &workv1.ManifestWork{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "cluster1", UID: "5b3b2c1e-0d7a-4f0e-9f51-8a4c1b0e2d11", Generation: 1},
		Spec: workv1.ManifestWorkSpec{Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{
			{RawExtension: runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"hello","namespace":"default"}}`)}},
		}}},
	}
	spec := types.EventType{DataType: codec.ManifestBundlesDataType, SubResource: types.SubResourceSpec, Action: types.CreateRequest}
	evt, err := c.Encode("hub-controller", spec, work)
	if err != nil {
		panic(err)
	}
	fmt.Println(evt.Type())

	// Agent side.
	got, err := generic.Decode(c, evt)
	if err != nil {
		panic(err)
	}
	fmt.Println(got.Namespace, got.Name, got.Generation, got.Annotations[codec.OriginalSourceAnnotation])

	got.Status.Conditions = []metav1.Condition{{Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: "AppliedManifestWorkComplete"}}
	status := types.EventType{DataType: codec.ManifestBundlesDataType, SubResource: types.SubResourceStatus, Action: types.UpdateRequest}
	evt, err = c.Encode("cluster1-agent", status, got)
	if err != nil {
		panic(err)
	}
	fmt.Println(evt.Type(), evt.Extensions()[types.ExtOriginalSource])

	// Source side again.
	reported, err := generic.Decode(c, evt)
	if err != nil {
		panic(err)
	}
	fmt.Println(reported.UID, reported.Status.Conditions[0].Type)
	// Output:
	// io.open-cluster-management.works.v1alpha1.manifestbundles.spec.create_request
	// cluster1 hello 1 hub-controller
	// io.open-cluster-management.works.v1alpha1.manifestbundles.status.update_request hub-controller
	// 5b3b2c1e-0d7a-4f0e-9f51-8a4c1b0e2d11 Applied
}

// The manifests codec carries works of exactly one manifest; the
// singular data type ("manifest") is accepted, the plural is emitted.
func ExampleNewManifestCodec() {
	c := codec.NewManifestCodec()
	work := &workv1.ManifestWork{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "cluster1", UID: "1f0c6a52-3e0b-4c55-a2a4-54a9a1b8f0c3", Generation: 2},
		Spec: workv1.ManifestWorkSpec{Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{
			{RawExtension: runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"hello","namespace":"default"}}`)}},
		}}},
	}
	update := types.EventType{DataType: codec.ManifestsDataType.Singular(), SubResource: types.SubResourceSpec, Action: types.UpdateRequest}
	evt, err := c.Encode("hub-controller", update, work)
	if err != nil {
		panic(err)
	}
	fmt.Println(evt.Type())
	fmt.Println(string(evt.Data()))

	work.Spec.Workload.Manifests = append(work.Spec.Workload.Manifests, work.Spec.Workload.Manifests[0])
	_, err = c.Encode("hub-controller", update, work)
	fmt.Println(err)
	// Output:
	// io.open-cluster-management.works.v1alpha1.manifests.spec.update_request
	// {"manifest":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"hello","namespace":"default"}}}
	// encode io.open-cluster-management.works.v1alpha1.manifest.spec.update_request event of work "cluster1/hello": spec.workload.manifests: 2 manifests, but the manifests codec carries exactly one: use manifestbundles
}
