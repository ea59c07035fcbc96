package server_test

import (
	"context"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	grpclib "google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/workwire/sdk-go/generic/types"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc/grpctest"
	"github.com/workwire/sdk-go/options/grpc/protocol"
	"github.com/workwire/sdk-go/options/grpc/server"
)

// requestService is a Service whose agents write specs of their own: it
// records each event with the identity that published it.
type requestService struct {
	*server.MemoryService
	mu   sync.Mutex
	got  []*cloudevents.Event
	from []server.Identity
}

func (s *requestService) HandleStatusUpdate(ctx context.Context, evt *cloudevents.Event) error {
	id, ok := server.IdentityFrom(ctx)
	if !ok {
		return status.Error(codes.Internal, "no identity in the Service's context")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got, s.from = append(s.got, evt), append(s.from, id)
	return nil
}

// An agent's spec request of a data type a Service owns (an OCM agent
// creating its ManagedCluster, renewing its Lease) goes to the Service,
// with the agent's verified identity, and is authorized as the agent of
// the cluster it names: for its own cluster only.
func TestAnAgentsSpecRequestGoesToItsService(t *testing.T) {
	svc := &requestService{MemoryService: server.NewMemoryService(dataType)}
	b := newSecureBroker(t, server.WithService(dataType, svc))
	agent := b.agent(t, "agent-cluster1")
	mustStart(t, agent, options.AgentSubscriptions("cluster1", []string{dataType}))

	create := event("join", "spec.create_request", map[string]string{types.ExtClusterName: "cluster1"})
	create.SetSource("cluster1-agent")
	if err := send(agent, options.Route{Role: options.RoleSpec, Source: "cluster1-agent", Cluster: "cluster1"}, create); err != nil {
		t.Fatalf("cluster1's agent asking to create a resource of its cluster: %v", err)
	}
	other := event("steal", "spec.update_request", map[string]string{types.ExtClusterName: "cluster2"})
	other.SetSource("cluster1-agent")
	err := send(agent, options.Route{Role: options.RoleSpec, Source: "cluster1-agent", Cluster: "cluster2"}, other)
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("cluster1's agent asking to update a resource of cluster2: %v, want PermissionDenied", err)
	}

	svc.mu.Lock()
	defer svc.mu.Unlock()
	if len(svc.got) != 1 || svc.got[0].ID() != "join" {
		t.Fatalf("the Service got %d events, want the create request alone", len(svc.got))
	}
	if svc.from[0].User != "agent-cluster1" {
		t.Errorf("the Service was told the request came from %q, want the certificate's agent-cluster1", svc.from[0].User)
	}
}

// A Service whose agents write only statuses refuses anything else an
// agent publishes, and keeps nothing of it.
func TestAStatusOnlyServiceRefusesASpecRequest(t *testing.T) {
	svc := server.NewMemoryService(dataType)
	b := newSecureBroker(t, server.WithService(dataType, svc))
	ctx := context.Background()
	if err := svc.Put(ctx, specFromService("r-spec", "cluster1", 1)); err != nil {
		t.Fatal(err)
	}
	agent := b.agent(t, "agent-cluster1")
	mustStart(t, agent, options.AgentSubscriptions("cluster1", []string{dataType}))
	forged := event("spec", "spec.update_request", map[string]string{types.ExtClusterName: "cluster1"})
	err := send(agent, options.Route{Role: options.RoleSpec, Source: "cluster1-agent", Cluster: "cluster1"}, forged)
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("an agent's spec request to a status-only Service: %v, want InvalidArgument", err)
	}
	if st, ok := svc.Status("r-spec"); ok {
		t.Errorf("the Service kept a status from the refused request: %v", st)
	}
}

// OCM's agents name no originalsource on the statuses of the types
// registration carries: such a status of a Service's data type is the
// Service's (without a Service it has no route: TestPublishWithoutARoute).
func TestAStatusNamingNoSourceGoesToItsService(t *testing.T) {
	svc := &requestService{MemoryService: server.NewMemoryService(dataType)}
	srv := grpctest.NewServer(t, server.WithService(dataType, svc))
	conn, err := grpclib.NewClient(srv.Addr(), grpclib.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	evt := event("report", "status.update_request", map[string]string{types.ExtClusterName: "cluster1", types.ExtOriginalSource: ""})
	pbe, err := protocol.ToProto(evt)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := protocol.NewCloudEventServiceClient(conn).Publish(ctx, &protocol.PublishRequest{Event: pbe}); err != nil {
		t.Fatalf("a status naming no source: %v", err)
	}
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if len(svc.got) != 1 || svc.got[0].ID() != "report" {
		t.Errorf("the Service got %d events, want the status", len(svc.got))
	}
}

// conflictService refuses every request as a kube-backed Service does on
// OCM's wire: FailedPrecondition carrying the Kubernetes status as JSON.
type conflictService struct{ *server.MemoryService }

func (conflictService) HandleStatusUpdate(context.Context, *cloudevents.Event) error {
	return status.Error(codes.FailedPrecondition, `{"ErrStatus":{"status":"Failure","message":"the object has been modified","reason":"Conflict","code":409}}`)
}

// The gRPC transport hands a Service's Kubernetes refusal to the caller as
// the StatusError it was.
func TestAServicesRefusalReachesTheAgentAsAKubernetesError(t *testing.T) {
	svc := conflictService{server.NewMemoryService(dataType)}
	b := newSecureBroker(t, server.WithService(dataType, svc))
	agent := b.agent(t, "agent-cluster1")
	mustStart(t, agent, options.AgentSubscriptions("cluster1", []string{dataType}))
	renew := event("renew", "spec.update_request", map[string]string{types.ExtClusterName: "cluster1"})
	renew.SetSource("cluster1-agent")
	err := send(agent, options.Route{Role: options.RoleSpec, Source: "cluster1-agent", Cluster: "cluster1"}, renew)
	if !apierrors.IsConflict(err) {
		t.Errorf("a Service's Conflict: %v, want a Kubernetes Conflict", err)
	}
}
