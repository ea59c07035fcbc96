package hub

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options/grpc/server"
	"github.com/workwire/sdk-go/registration/kubeservice"
)

// Authorizer decides an agent's requests as OCM's default RBAC for
// registration does, for a hub without a kube-apiserver's RBAC to ask
// (with one, use kubeauth.ResourceAttributes):
//
//   - an agent — a user "system:open-cluster-management:<cluster>:<agent>",
//     as its certificate names it, with no more parts — acts as its own
//     cluster's agent, for every data type;
//   - a bootstrap identity (Bootstrap) may create a ManagedCluster and CSRs
//     and watch those two types (subscribe, and ask for their resync), for
//     any cluster, and nothing else;
//   - everything else (a source, say) goes to Next, or is refused.
type Authorizer struct {
	// Bootstrap names the bootstrap identities: user names, or "group:"
	// and a group name.
	Bootstrap []string
	// Next decides what is neither an agent's nor a bootstrap identity's;
	// nil refuses it.
	Next server.Authorizer
}

var _ server.Authorizer = Authorizer{}

// joinTypes are the data types a bootstrap identity uses to join.
var joinTypes = []string{kubeservice.ManagedClusterCodec.DataType().String(), kubeservice.CSRCodec.DataType().String()}

// Authorize implements server.Authorizer.
func (a Authorizer) Authorize(ctx context.Context, id server.Identity, req server.Request) error {
	source, cluster := req.ActsAs()
	if own, ok := agentOf(id.User); ok {
		if source == "" && cluster == own {
			return nil
		}
		return fmt.Errorf("%w: %q is an agent of cluster %q, not of %q", server.ErrDenied, id.User, own, cluster)
	}
	if a.isBootstrap(id) {
		joining := source == "" && cluster != "" && slices.Contains(joinTypes, req.DataType) &&
			(req.Verb == server.VerbSubscribe ||
				req.SubResource == types.SubResourceSpec && (req.Action == types.CreateRequest || req.Action == types.ResyncRequest))
		if joining {
			return nil
		}
		return fmt.Errorf("%w: %q is a bootstrap identity: it may create its ManagedCluster and CSRs and watch them, nothing else", server.ErrDenied, id.User)
	}
	if a.Next != nil {
		return a.Next.Authorize(ctx, id, req)
	}
	return fmt.Errorf("%w: %q is neither an agent nor a bootstrap identity", server.ErrDenied, id.User)
}

// agentOf returns the cluster of an agent's user name,
// "system:open-cluster-management:<cluster>:<agent>" — exactly those two
// parts: OCM's other identities under the prefix (an add-on's,
// "...:<cluster>:addon:<addon>:agent:<agent>") are not a cluster's agent.
func agentOf(user string) (string, bool) {
	rest, ok := strings.CutPrefix(user, kubeservice.AgentCommonNamePrefix)
	if !ok {
		return "", false
	}
	cluster, agent, ok := strings.Cut(rest, ":")
	if !ok || cluster == "" || agent == "" || strings.Contains(agent, ":") {
		return "", false
	}
	return cluster, true
}

func (a Authorizer) isBootstrap(id server.Identity) bool {
	if slices.Contains(a.Bootstrap, id.User) {
		return true
	}
	for _, g := range id.Groups {
		if slices.Contains(a.Bootstrap, "group:"+g) {
			return true
		}
	}
	return false
}
