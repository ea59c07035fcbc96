package work_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/options/memory"
	"github.com/workwire/sdk-go/work"
)

// call invokes every method of v with harmless arguments and returns, per
// method, its results. It fails t on a panic, and on a nil pointer or
// interface returned without an error.
func callAll[I any](t *testing.T, name string, v I) map[string][]reflect.Value {
	t.Helper()
	out := map[string][]reflect.Value{}
	rv := reflect.ValueOf(v)
	it := reflect.TypeFor[I]() // the interface's methods, not the implementation's
	for i := range it.NumMethod() {
		m := rv.MethodByName(it.Method(i).Name)
		mname := fmt.Sprintf("%s.%s", name, it.Method(i).Name)
		args := make([]reflect.Value, m.Type().NumIn())
		for j := range args {
			args[j] = argFor(m.Type().In(j))
		}
		if m.Type().IsVariadic() {
			args = args[:len(args)-1]
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s panicked: %v", mname, r)
				}
			}()
			res := m.Call(args)
			out[mname] = res
			var err error
			if n := len(res); n > 0 && res[n-1].Type() == reflect.TypeFor[error]() && !res[n-1].IsNil() {
				err = res[n-1].Interface().(error)
			}
			for k, r := range res {
				if err == nil && (r.Kind() == reflect.Interface || r.Kind() == reflect.Pointer) && r.IsNil() && r.Type() != reflect.TypeFor[error]() {
					t.Errorf("%s returned a nil %s (result %d) and no error", mname, r.Type(), k)
				}
			}
			if w, ok := firstWatch(res); ok && err == nil {
				w.Stop()
			}
		}()
	}
	return out
}

func firstWatch(res []reflect.Value) (watch.Interface, bool) {
	for _, r := range res {
		if r.Type() == reflect.TypeFor[watch.Interface]() && !r.IsNil() {
			return r.Interface().(watch.Interface), true
		}
	}
	return nil, false
}

func argFor(t reflect.Type) reflect.Value {
	switch {
	case t == reflect.TypeFor[context.Context]():
		return reflect.ValueOf(context.Background())
	case t.Kind() == reflect.String:
		return reflect.ValueOf("x").Convert(t)
	case t.Kind() == reflect.Pointer:
		p := reflect.New(t.Elem())
		if t.Elem().Kind() == reflect.Struct {
			if f := p.Elem().FieldByName("ObjectMeta"); f.IsValid() {
				f.FieldByName("Name").SetString("x")
			}
		}
		return p
	default:
		return reflect.Zero(t)
	}
}

func errorOf(res []reflect.Value) error {
	if n := len(res); n > 0 && res[n-1].Type() == reflect.TypeFor[error]() && !res[n-1].IsNil() {
		return res[n-1].Interface().(error)
	}
	return nil
}

func TestEveryMethodAnswers(t *testing.T) {
	t.Parallel()
	b := memory.NewBroker()
	for _, side := range []struct {
		name    string
		builder *work.ClientHolderBuilder
	}{
		{"hub", hubBuilder(memoryTransport(b), "hub1")},
		{"agent", agentBuilder(memoryTransport(b), "cluster1")},
	} {
		t.Run(side.name, func(t *testing.T) {
			h := startHolder(t, side.builder)
			cs := h.WorkInterface()
			callAll(t, "Interface", cs)
			v1 := cs.WorkV1()
			callAll(t, "WorkV1", v1)
			callAll(t, "ManifestWorks", v1.ManifestWorks("cluster1"))
			callAll(t, "ManifestWorks(all)", v1.ManifestWorks(""))
			// Both sides refuse an update without a namespace alike.
			unbound := &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Name: "w", ResourceVersion: "1"}}
			if _, err := v1.ManifestWorks("").Update(context.Background(), unbound, metav1.UpdateOptions{}); !apierrors.IsBadRequest(err) {
				t.Errorf("Update without a namespace: %v, want BadRequest", err)
			}
			if _, err := v1.ManifestWorks("").UpdateStatus(context.Background(), unbound, metav1.UpdateOptions{}); !apierrors.IsBadRequest(err) && !apierrors.IsMethodNotSupported(err) {
				t.Errorf("UpdateStatus without a namespace: %v, want BadRequest (agent) or MethodNotAllowed (hub)", err)
			}
			for name, res := range callAll(t, "AppliedManifestWorks", v1.AppliedManifestWorks()) {
				if err := errorOf(res); !apierrors.IsMethodNotSupported(err) {
					t.Errorf("%s: %v, want MethodNotAllowed", name, err)
				}
			}
			callAll(t, "WorkV1alpha1", cs.WorkV1alpha1())
			for name, res := range callAll(t, "ManifestWorkReplicaSets", cs.WorkV1alpha1().ManifestWorkReplicaSets("ns")) {
				if err := errorOf(res); !apierrors.IsMethodNotSupported(err) {
					t.Errorf("%s: %v, want MethodNotAllowed", name, err)
				}
			}
			callAll(t, "Discovery", cs.Discovery())
			rc := v1.RESTClient()
			callAll(t, "RESTClient", rc)
			if err := rc.Get().Resource("appliedmanifestworks").Do(context.Background()).Error(); !apierrors.IsMethodNotSupported(err) {
				t.Errorf("a raw request: %v, want MethodNotAllowed", err)
			}

			// Discovery tells what is served.
			res, err := cs.Discovery().ServerResourcesForGroupVersion("work.open-cluster-management.io/v1")
			if err != nil || len(res.APIResources) == 0 || res.APIResources[0].Name != "manifestworks" {
				t.Errorf("discovery: %v %v", res, err)
			}
			// A fresh value per ManifestWorks call.
			if v1.ManifestWorks("a") == v1.ManifestWorks("a") {
				t.Error("ManifestWorks returns a shared value")
			}
			// Nil objects are refused, not dereferenced.
			if _, err := v1.ManifestWorks("cluster1").Create(context.Background(), nil, metaCreate); !apierrors.IsBadRequest(err) {
				t.Errorf("Create(nil): %v", err)
			}
		})
	}
}

var metaCreate = metav1.CreateOptions{}
