package kubeservice_test

import (
	"context"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options/grpc/server"
	"github.com/workwire/sdk-go/registration/kubeservice"
)

// An agent asks for a token of a service account of its cluster's
// namespace: the kube-apiserver issues it, and the answer, under the
// agent's request UID, waits for the server to send it down. A request for
// another cluster's service account is Forbidden and issues nothing; no
// answer waits for it.
func TestAnAgentGetsATokenOfItsOwnServiceAccountsOnly(t *testing.T) {
	h := startHub(t)
	for _, ns := range []string{"cluster1", "cluster2"} {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "addon-agent", Namespace: ns}}
		if _, err := h.kube.CoreV1().ServiceAccounts(ns).Create(context.Background(), sa, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	svc, err := kubeservice.NewTokenRequests(h.kube, server.DefaultSourceID)
	if err != nil {
		t.Fatal(err)
	}
	changes := &changes{}
	svc.RegisterHandler(changes)
	ctx := asAgent("system:open-cluster-management:cluster1:agent1")
	expiry := int64(3600)
	ask := func(ns, uid string) error {
		req := &authenticationv1.TokenRequest{
			ObjectMeta: metav1.ObjectMeta{Name: "addon-agent", Namespace: ns, UID: k8stypes.UID(uid)},
			Spec:       authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry},
		}
		evt := agentEvent(t, kubeservice.TokenRequestCodec, types.SubResourceSpec, types.CreateRequest, req)
		evt.SetExtension(types.ExtClusterName, "cluster1") // the cluster the server verified
		return svc.HandleStatusUpdate(ctx, evt)
	}

	if err := ask("cluster1", "req-1"); err != nil {
		t.Fatalf("a token of cluster1's service account: %v", err)
	}
	if !changes.wasCreated("req-1") {
		t.Fatal("the server was not told to send the answer")
	}
	evt, err := svc.Get(context.Background(), "req-1")
	if err != nil {
		t.Fatal(err)
	}
	if got := evt.Type(); got != "authentication.k8s.io.v1.tokenrequests.spec.create_request" {
		t.Errorf("answer type %q", got)
	}
	answer, err := generic.Decode(kubeservice.TokenRequestCodec, evt)
	if err != nil {
		t.Fatal(err)
	}
	if answer.UID != "req-1" || answer.Name != "addon-agent" || answer.Namespace != "cluster1" || answer.Status.Token == "" {
		t.Errorf("answer %s/%s uid %q token %d bytes: want cluster1/addon-agent under req-1 with a token", answer.Namespace, answer.Name, answer.UID, len(answer.Status.Token))
	}
	if cluster, _, _ := types.StringExtension(evt, types.ExtClusterName); cluster != "cluster1" {
		t.Errorf("answer for cluster %q", cluster)
	}

	err = ask("cluster2", "req-2")
	if r := kubeReason(t, err); r != metav1.StatusReasonForbidden {
		t.Errorf("a token of cluster2's service account asked by cluster1: reason %q, want Forbidden", r)
	}
	if changes.wasCreated("req-2") {
		t.Error("an answer was sent for a refused request")
	}
	if _, err := svc.Get(context.Background(), "req-2"); err == nil {
		t.Error("an answer is held for a refused request")
	}

	// A service account that does not exist: the kube-apiserver's NotFound.
	if err := h.kube.CoreV1().ServiceAccounts("cluster1").Delete(context.Background(), "addon-agent", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if r := kubeReason(t, ask("cluster1", "req-3")); r != metav1.StatusReasonNotFound {
		t.Errorf("a token of a missing service account: reason %q, want NotFound", r)
	}
}
