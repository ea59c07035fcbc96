// Package unsupported is the rest of a drop-in clientset: everything an
// event-based clientset does not serve itself — other resources, other
// verbs, raw REST requests — goes through client-go's own generated
// clients over an HTTP transport that answers in-process, the way a
// kube-apiserver answers a method it does not allow (405
// MethodNotAllowed). Discovery works, and lists only what is served.
package unsupported

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// Served is what a clientset serves over events, for discovery: per
// group version, its resources.
type Served map[string][]metav1.APIResource

// Config returns a rest.Config that never leaves the process: discovery
// lists served, and every other request is refused with 405, its message
// naming what (the clientset, say "the event-based work client") serves.
func Config(what string, served Served) *rest.Config {
	return &rest.Config{
		Host:      "http://workwire.invalid",
		Transport: transport{what: what, served: served},
		// Every request is answered in-process: a limit it never reaches.
		QPS:   1e6,
		Burst: 1e6,
	}
}

type transport struct {
	what   string
	served Served
}

func (t transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
	if req.Method == http.MethodGet {
		path := strings.TrimSuffix(req.URL.Path, "/")
		switch {
		case path == "/api":
			return jsonResponse(req, http.StatusOK, &metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}})
		case path == "/apis":
			return jsonResponse(req, http.StatusOK, t.groups())
		case strings.HasPrefix(path, "/apis/"):
			if resources, ok := t.served[strings.TrimPrefix(path, "/apis/")]; ok {
				return jsonResponse(req, http.StatusOK, &metav1.APIResourceList{
					TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
					GroupVersion: strings.TrimPrefix(path, "/apis/"),
					APIResources: resources,
				})
			}
		}
	}
	return jsonResponse(req, http.StatusMethodNotAllowed, &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure,
		Code:     http.StatusMethodNotAllowed,
		Reason:   metav1.StatusReasonMethodNotAllowed,
		Message:  fmt.Sprintf("%s %s is not supported by %s", req.Method, req.URL.Path, t.what),
	})
}

// groups is the discovery of the served group versions, one version per
// group in these clientsets.
func (t transport) groups() *metav1.APIGroupList {
	list := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
	for _, gv := range slices.Sorted(maps.Keys(t.served)) {
		group, version, _ := strings.Cut(gv, "/")
		v := metav1.GroupVersionForDiscovery{GroupVersion: gv, Version: version}
		list.Groups = append(list.Groups, metav1.APIGroup{Name: group, Versions: []metav1.GroupVersionForDiscovery{v}, PreferredVersion: v})
	}
	return list
}

func jsonResponse(req *http.Request, code int, body any) (*http.Response, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	return &http.Response{
		StatusCode: code,
		Status:     http.StatusText(code),
		Header:     http.Header{"Content-Type": []string{"application/json"}},
		Body:       io.NopCloser(bytes.NewReader(data)),
		Request:    req,
	}, nil
}
