// Package kubefake makes client-go's fake clientsets write as a
// kube-apiserver does where hub Services and controllers rely on it: a
// create gets a UID, a creation timestamp, generation 1, a name from its
// generateName and a resourceVersion; an update must name the current
// resourceVersion (or none), raises the generation when the spec changes,
// and writes either the status (the status and approval subresources) or
// everything else; a delete of an object with finalizers only marks it,
// and it leaves once its last finalizer is removed. It is the in-process
// stand-in for a kube-apiserver of examples and tests; the hub Services'
// own tests run against a real one too (internal/testsupport/kubetest).
package kubefake

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"sync/atomic"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/watch"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	addonfake "open-cluster-management.io/api/client/addon/clientset/versioned/fake"
	clusterfake "open-cluster-management.io/api/client/cluster/clientset/versioned/fake"
	workfake "open-cluster-management.io/api/client/work/clientset/versioned/fake"
)

// Clientset is what every generated fake clientset is: a Fake with its
// tracker.
type Clientset interface {
	PrependReactor(verb, resource string, reaction clienttesting.ReactionFunc)
	Tracker() clienttesting.ObjectTracker
}

// ResourceVersions numbers writes across clientsets, as one etcd does.
type ResourceVersions struct{ last atomic.Uint64 }

func (r *ResourceVersions) next() string { return strconv.FormatUint(r.last.Add(1), 10) }

// Serve makes c write as a kube-apiserver does, numbering its writes with
// rvs (shared by the clientsets of one stand-in).
func Serve(c Clientset, rvs *ResourceVersions) {
	s := server{tracker: c.Tracker(), rvs: rvs}
	c.PrependReactor("create", "*", s.create)
	c.PrependReactor("update", "*", s.update)
	c.PrependReactor("delete", "*", s.delete)
}

type server struct {
	tracker clienttesting.ObjectTracker
	rvs     *ResourceVersions
}

const nameChars = "bcdfghjklmnpqrstvwxz2456789"

func (s server) create(a clienttesting.Action) (bool, runtime.Object, error) {
	create := a.(clienttesting.CreateAction)
	if create.GetSubresource() != "" {
		return false, nil, nil
	}
	obj := create.GetObject().DeepCopyObject()
	m, err := meta.Accessor(obj)
	if err != nil {
		return true, nil, apierrors.NewBadRequest(err.Error())
	}
	if m.GetName() == "" && m.GetGenerateName() != "" {
		suffix := make([]byte, 5)
		for i := range suffix {
			suffix[i] = nameChars[rand.IntN(len(nameChars))]
		}
		m.SetName(m.GetGenerateName() + string(suffix))
	}
	if m.GetName() == "" {
		return true, nil, apierrors.NewBadRequest("metadata.name: Required value: name or generateName is required")
	}
	m.SetNamespace(create.GetNamespace())
	m.SetUID(uuid.NewUUID())
	m.SetCreationTimestamp(metav1.Now())
	m.SetGeneration(1)
	m.SetDeletionTimestamp(nil)
	m.SetResourceVersion(s.rvs.next())
	if csr, ok := obj.(*certificatesv1.CertificateSigningRequest); ok {
		csr.Spec.Username = User // its creator, as a kube-apiserver records it
	}
	if err := s.tracker.Create(a.GetResource(), obj, create.GetNamespace()); err != nil {
		return true, nil, err
	}
	return true, obj, nil
}

func (s server) update(a clienttesting.Action) (bool, runtime.Object, error) {
	update := a.(clienttesting.UpdateAction)
	next := update.GetObject().DeepCopyObject()
	nm, err := meta.Accessor(next)
	if err != nil {
		return true, nil, apierrors.NewBadRequest(err.Error())
	}
	gvr := a.GetResource()
	obj, err := s.tracker.Get(gvr, update.GetNamespace(), nm.GetName())
	if err != nil {
		return true, nil, err
	}
	cur := obj.DeepCopyObject()
	cm, _ := meta.Accessor(cur)
	if rv := nm.GetResourceVersion(); rv != "" && rv != cm.GetResourceVersion() {
		return true, nil, apierrors.NewConflict(gvr.GroupResource(), nm.GetName(),
			fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	switch update.GetSubresource() {
	case "status", "approval":
		// The status alone changes.
		setField(cur, "Status", field(next, "Status"))
		next, nm = cur, cm
	case "":
		setField(next, "Status", field(cur, "Status"))
		nm.SetGeneration(cm.GetGeneration())
		if f := field(next, "Spec"); f.IsValid() && !reflect.DeepEqual(f.Interface(), field(cur, "Spec").Interface()) {
			nm.SetGeneration(cm.GetGeneration() + 1)
		}
		nm.SetDeletionTimestamp(cm.GetDeletionTimestamp())
	default:
		return false, nil, nil
	}
	nm.SetUID(cm.GetUID())
	nm.SetCreationTimestamp(cm.GetCreationTimestamp())
	nm.SetNamespace(update.GetNamespace())
	if nm.GetDeletionTimestamp() != nil && len(nm.GetFinalizers()) == 0 {
		return true, next, s.tracker.Delete(gvr, update.GetNamespace(), nm.GetName())
	}
	nm.SetResourceVersion(s.rvs.next())
	return true, next, s.tracker.Update(gvr, next, update.GetNamespace())
}

func (s server) delete(a clienttesting.Action) (bool, runtime.Object, error) {
	del := a.(clienttesting.DeleteAction)
	obj, err := s.tracker.Get(a.GetResource(), del.GetNamespace(), del.GetName())
	if err != nil {
		return true, nil, err
	}
	m, _ := meta.Accessor(obj)
	if len(m.GetFinalizers()) == 0 {
		return true, nil, s.tracker.Delete(a.GetResource(), del.GetNamespace(), del.GetName())
	}
	if m.GetDeletionTimestamp() != nil {
		return true, obj, nil
	}
	marked := obj.DeepCopyObject()
	mm, _ := meta.Accessor(marked)
	now := metav1.Now()
	mm.SetDeletionTimestamp(&now)
	mm.SetResourceVersion(s.rvs.next())
	return true, marked, s.tracker.Update(a.GetResource(), marked, del.GetNamespace())
}

// field is obj's struct field name, or the zero Value.
func field(obj runtime.Object, name string) reflect.Value {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return reflect.Value{}
	}
	return v.Elem().FieldByName(name)
}

func setField(obj runtime.Object, name string, value reflect.Value) {
	if f := field(obj, name); f.IsValid() && value.IsValid() && f.CanSet() {
		f.Set(value)
	}
}

// Hub is a stand-in for a hub's kube-apiserver: fake clientsets of every
// API registration and works use, writing as Serve makes them, numbered by
// one counter.
type Hub struct {
	Kube    *kubefake.Clientset
	Cluster *clusterfake.Clientset
	AddOn   *addonfake.Clientset
	Work    *workfake.Clientset
}

// NewHub returns an empty stand-in.
func NewHub() *Hub {
	//lint:ignore SA1019 OCM's clientsets have no NewClientset (they are generated without apply configurations)
	h := &Hub{Kube: kubefake.NewClientset(), Cluster: clusterfake.NewSimpleClientset(), AddOn: addonfake.NewSimpleClientset(), Work: workfake.NewSimpleClientset()}
	rvs := &ResourceVersions{}
	for _, c := range []interface {
		Clientset
		PrependWatchReactor(resource string, reaction clienttesting.WatchReactionFunc)
	}{h.Kube, h.Cluster, h.AddOn, h.Work} {
		Serve(c, rvs)
		c.PrependWatchReactor("*", noWatchList)
	}
	h.Kube.PrependReactor("create", "selfsubjectreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		return true, &authenticationv1.SelfSubjectReview{Status: authenticationv1.SelfSubjectReviewStatus{
			UserInfo: authenticationv1.UserInfo{Username: User}}}, nil
	})
	return h
}

// User is who every client of a stand-in is: the creator of its
// CertificateSigningRequests, and the user a SelfSubjectReview names.
const User = "kubefake:admin"

// noWatchList refuses a watch-list: the tracker sends no bookmark at the
// end of the initial events, so the informer falls back to list and watch,
// which the tracker serves from the list's resourceVersion on.
func noWatchList(a clienttesting.Action) (bool, watch.Interface, error) {
	if opts := a.(clienttesting.WatchActionImpl).ListOptions; opts.SendInitialEvents != nil && *opts.SendInitialEvents {
		return true, nil, apierrors.NewBadRequest("the stand-in kube-apiserver does not serve watch-list")
	}
	return false, nil, nil
}
