package codec_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubetypes "k8s.io/apimachinery/pkg/types"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/generic/types"
)

func TestSpecEventTypeSaysWhatTheAgentIsTold(t *testing.T) {
	now := metav1.Now()
	for _, c := range []struct {
		w    *workv1.ManifestWork
		want types.Action
	}{
		{&workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Generation: 1}}, types.CreateRequest},
		{&workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Generation: 2}}, types.UpdateRequest},
		{&workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Generation: 2, DeletionTimestamp: &now}}, types.DeleteRequest},
	} {
		et := codec.SpecEventType(c.w)
		if et.Action != c.want || et.SubResource != types.SubResourceSpec || et.DataType != codec.ManifestBundlesDataType {
			t.Errorf("generation %d, deleting %v: %v, want a spec %s of manifestbundles", c.w.Generation, c.w.DeletionTimestamp != nil, et, c.want)
		}
	}
}

func TestStatusHashesAskForEveryStatusUntilOneIsReported(t *testing.T) {
	none := []*workv1.ManifestWork{{ObjectMeta: metav1.ObjectMeta{UID: "a"}}, {ObjectMeta: metav1.ObjectMeta{UID: "b"}}}
	if hashes, err := codec.StatusHashes(none); err != nil || hashes != nil {
		t.Errorf("no status yet: %v, %v; want nil (ask for every status)", hashes, err)
	}
	reported := append(none, &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{UID: kubetypes.UID("c")},
		Status: workv1.ManifestWorkStatus{Conditions: []metav1.Condition{{Type: workv1.WorkApplied, Status: metav1.ConditionTrue}}}})
	hashes, err := codec.StatusHashes(reported)
	if err != nil || len(hashes) != 3 || hashes[0].StatusHash != "" || hashes[2].StatusHash == "" || hashes[2].ResourceID != "c" {
		t.Errorf("one reported: %+v, %v; want every work's, the unreported ones empty", hashes, err)
	}
}
