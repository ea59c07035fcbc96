package work

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	workv1client "open-cluster-management.io/api/client/work/clientset/versioned/typed/work/v1"
	workv1alpha1client "open-cluster-management.io/api/client/work/clientset/versioned/typed/work/v1alpha1"
	workv1 "open-cluster-management.io/api/work/v1"
)

// Everything the event-based clientset does not serve — AppliedManifestWorks,
// ManifestWorkReplicaSets, raw REST requests — goes through a real client-go
// REST client whose HTTP transport answers in-process, the way a
// kube-apiserver answers a method it does not allow. Discovery works, and
// lists only what is served: manifestworks and manifestworks/status.

// unsupportedTransport answers discovery and refuses everything else with
// 405 MethodNotAllowed.
type unsupportedTransport struct{}

func (unsupportedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
	if req.Method == http.MethodGet {
		switch strings.TrimSuffix(req.URL.Path, "/") {
		case "/api":
			return jsonResponse(req, http.StatusOK, &metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}})
		case "/apis":
			gv := metav1.GroupVersionForDiscovery{GroupVersion: workv1.GroupVersion.String(), Version: workv1.GroupVersion.Version}
			return jsonResponse(req, http.StatusOK, &metav1.APIGroupList{
				TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"},
				Groups:   []metav1.APIGroup{{Name: workv1.GroupName, Versions: []metav1.GroupVersionForDiscovery{gv}, PreferredVersion: gv}},
			})
		case "/apis/" + workv1.GroupVersion.String():
			return jsonResponse(req, http.StatusOK, &metav1.APIResourceList{
				TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
				GroupVersion: workv1.GroupVersion.String(),
				APIResources: []metav1.APIResource{
					{Name: "manifestworks", SingularName: "manifestwork", Namespaced: true, Kind: "ManifestWork",
						Verbs: metav1.Verbs{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}},
					{Name: "manifestworks/status", Namespaced: true, Kind: "ManifestWork", Verbs: metav1.Verbs{"get", "patch", "update"}},
				},
			})
		}
	}
	return jsonResponse(req, http.StatusMethodNotAllowed, &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure,
		Code:     http.StatusMethodNotAllowed,
		Reason:   metav1.StatusReasonMethodNotAllowed,
		Message:  fmt.Sprintf("%s %s is not supported by the event-based work client: it serves ManifestWorks only", req.Method, req.URL.Path),
	})
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

// unsupportedConfig is a rest.Config that never leaves the process.
func unsupportedConfig() *rest.Config {
	return &rest.Config{
		Host:      "http://workwire.invalid",
		Transport: unsupportedTransport{},
		// Every request is answered in-process: a limit it never reaches.
		QPS:   1e6,
		Burst: 1e6,
	}
}

// unsupportedClients are the generated clients for everything the
// clientset does not serve itself, over the in-process transport.
type unsupportedClients struct {
	discovery discovery.DiscoveryInterface
	v1        *workv1client.WorkV1Client
	v1alpha1  *workv1alpha1client.WorkV1alpha1Client
}

func newUnsupportedClients() (*unsupportedClients, error) {
	cfg := unsupportedConfig()
	d, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	v1, err := workv1client.NewForConfig(unsupportedConfig())
	if err != nil {
		return nil, fmt.Errorf("work/v1 client: %w", err)
	}
	v1alpha1, err := workv1alpha1client.NewForConfig(unsupportedConfig())
	if err != nil {
		return nil, fmt.Errorf("work/v1alpha1 client: %w", err)
	}
	return &unsupportedClients{discovery: d, v1: v1, v1alpha1: v1alpha1}, nil
}
