package codec_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubetypes "k8s.io/apimachinery/pkg/types"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
)

func leaseCodec(t *testing.T) *codec.KubeCodec[*coordinationv1.Lease] {
	t.Helper()
	c, err := codec.NewKubeCodec(coordinationv1.SchemeGroupVersion.WithKind("Lease"), "leases",
		func(l *coordinationv1.Lease) string { return l.Namespace })
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The wire of OCM's registration: the whole object with apiVersion and
// kind, its resourceVersion as the version, its cluster as clustername, an
// empty originalsource; a deletion carries no data.
func TestKubeCodecSpeaksOCMsRegistrationWire(t *testing.T) {
	c := leaseCodec(t)
	if got := c.DataType().String(); got != "coordination.k8s.io.v1.leases" {
		t.Errorf("data type %q", got)
	}
	renewed := metav1.NewMicroTime(time.Now().Truncate(time.Microsecond))
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "managed-cluster-lease", Namespace: "cluster1", UID: "u1", ResourceVersion: "4711", Generation: 1},
		Spec:       coordinationv1.LeaseSpec{RenewTime: &renewed},
	}
	leaseUpdate := types.EventType{DataType: c.DataType(), SubResource: types.SubResourceSpec, Action: types.UpdateRequest}
	evt, err := c.Encode("cluster1-agent", leaseUpdate, lease)
	if err != nil {
		t.Fatal(err)
	}
	for ext, want := range map[string]string{types.ExtResourceID: "u1", types.ExtResourceVersion: "4711", types.ExtClusterName: "cluster1", types.ExtOriginalSource: ""} {
		if got, ok, _ := types.StringExtension(evt, ext); !ok || got != want {
			t.Errorf("extension %s = %q (present %v), want %q", ext, got, ok, want)
		}
	}
	var payload map[string]any
	if err := json.Unmarshal(evt.Data(), &payload); err != nil || payload["apiVersion"] != "coordination.k8s.io/v1" || payload["kind"] != "Lease" {
		t.Errorf("payload %v, %v: want the object with its apiVersion and kind", payload, err)
	}
	if v := c.Version(lease); v != 4711 {
		t.Errorf("version %d, want the resourceVersion 4711", v)
	}
	back, err := generic.Decode(c, evt)
	if err != nil {
		t.Fatal(err)
	}
	if back.UID != "u1" || back.ResourceVersion != "4711" || !back.Spec.RenewTime.Equal(&renewed) {
		t.Errorf("decoded %+v", back)
	}

	now := metav1.Now()
	lease.DeletionTimestamp = &now
	gone, err := c.Encode("kube", leaseUpdate, lease)
	if err != nil {
		t.Fatal(err)
	}
	if len(gone.Data()) != 0 {
		t.Errorf("a deletion carries data: %s", gone.Data())
	}
	back, err = generic.Decode(c, gone)
	if err != nil {
		t.Fatal(err)
	}
	if back.UID != "u1" || back.DeletionTimestamp == nil {
		t.Errorf("decoded deletion %+v", back.ObjectMeta)
	}
}

// An agent's create carries no resourceid and no version: the hub has not
// stored the object yet.
func TestKubeCodecEncodesAnObjectTheHubHasNotStored(t *testing.T) {
	c := leaseCodec(t)
	evt, err := c.Encode("cluster1-agent", types.EventType{DataType: c.DataType(), SubResource: types.SubResourceSpec, Action: types.CreateRequest},
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l", Namespace: "cluster1"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, ext := range []string{types.ExtResourceID, types.ExtResourceVersion} {
		if _, ok := evt.Extensions()[ext]; ok {
			t.Errorf("extension %s present", ext)
		}
	}
}

// OCM's programs of v1.2.0 (the klusterlet's registration agent among them)
// put the object's name in resourceid, not its UID: the object keeps the
// UID its payload gives, and a create, which has none, gets none.
func TestKubeCodecAcceptsTheNameAsResourceID(t *testing.T) {
	c := leaseCodec(t)
	for name, tc := range map[string]struct {
		action  types.Action
		uid     kubetypes.UID
		wantUID kubetypes.UID
	}{
		"a renewal of a stored lease": {types.UpdateRequest, "u1", "u1"},
		"a create":                    {types.CreateRequest, "", ""},
	} {
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "managed-cluster-lease", Namespace: "cluster1", UID: tc.uid, ResourceVersion: "7"}}
		evt, err := c.Encode("cluster1-agent", types.EventType{DataType: c.DataType(), SubResource: types.SubResourceSpec, Action: tc.action}, lease)
		if err != nil {
			t.Fatal(err)
		}
		evt.SetExtension(types.ExtResourceID, lease.Name)
		back, err := generic.Decode(c, evt)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if back.UID != tc.wantUID {
			t.Errorf("%s: uid %q, want %q", name, back.UID, tc.wantUID)
		}
	}
}

func TestKubeCodecRefusesBadInput(t *testing.T) {
	c := leaseCodec(t)
	dt := c.DataType()
	good := func() *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l", Namespace: "cluster1", UID: "u1", ResourceVersion: "7"}}
	}
	encode := func(l *coordinationv1.Lease) error {
		_, err := c.Encode("src", types.EventType{DataType: dt, SubResource: types.SubResourceSpec, Action: types.UpdateRequest}, l)
		return err
	}
	noCluster := good()
	noCluster.Namespace = ""
	badRV := good()
	badRV.ResourceVersion = "abc"
	for name, tc := range map[string]struct {
		err  error
		want string
	}{
		"nil":                   {encode(nil), "object is nil"},
		"no cluster":            {encode(noCluster), "names no cluster"},
		"a non-numeric version": {encode(badRV), `"abc" is not a non-negative decimal number`},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", name, tc.err, tc.want)
		}
	}

	evt, err := c.Encode("src", types.EventType{DataType: dt, SubResource: types.SubResourceSpec, Action: types.UpdateRequest}, good())
	if err != nil {
		t.Fatal(err)
	}
	otherUID := evt.Clone()
	otherUID.SetExtension(types.ExtResourceID, "u2")
	noData := evt.Clone()
	noData.DataEncoded = nil
	wrongKind := evt.Clone()
	_ = wrongKind.SetData("application/json", map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"uid": kubetypes.UID("u1")}})
	for name, tc := range map[string]struct {
		evt  func() error
		want string
	}{
		"a resourceid that is not the object's": {func() error { _, err := generic.Decode(c, &otherUID); return err }, `"u2", but the lease's uid is "u1" and its name "l"`},
		"no data on an update":                  {func() error { _, err := generic.Decode(c, &noData); return err }, "only a deletion carries no lease"},
		"another kind":                          {func() error { _, err := generic.Decode(c, &wrongKind); return err }, `kind "ConfigMap"`},
	} {
		if err := tc.evt(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, tc.want)
		}
	}
}
