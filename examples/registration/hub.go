package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	addonclient "open-cluster-management.io/api/client/addon/clientset/versioned"
	clusterclient "open-cluster-management.io/api/client/cluster/clientset/versioned"
	clusterinformers "open-cluster-management.io/api/client/cluster/informers/externalversions"
	workclient "open-cluster-management.io/api/client/work/clientset/versioned"
	workinformers "open-cluster-management.io/api/client/work/informers/externalversions"
	clusterv1 "open-cluster-management.io/api/cluster/v1"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/options/grpc/server"
	"github.com/workwire/sdk-go/registration/agent"
	"github.com/workwire/sdk-go/registration/hub"
	"github.com/workwire/sdk-go/registration/kubeservice"
	"github.com/workwire/sdk-go/registration/signer"
	workservice "github.com/workwire/sdk-go/work/kubeservice"
)

// hubClients are the hub's clients of its kube-apiserver (or stand-in).
type hubClients struct {
	kube    kubernetes.Interface
	cluster clusterclient.Interface
	addon   addonclient.Interface
	work    workclient.Interface
}

// bootstrapGroup is the group of the bootstrap tokens' identities.
const bootstrapGroup = "system:bootstrappers"

// replica is one of the hub's gRPC servers: the registration Services and
// the signer (registration/hub) and the ManifestWork Service, over the
// kube-apiserver every replica shares.
type replica struct {
	srv    *server.Server
	addr   string
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startReplica(ctx context.Context, c hubClients, p *pki, tokens map[string]server.Identity, validity time.Duration, log logr.Logger) (*replica, error) {
	h, err := hub.New(hub.Config{Kube: c.kube, Cluster: c.cluster, AddOn: c.addon, CACert: p.certPEM, CAKey: p.keyPEM,
		SignerOptions: []signer.Option{signer.WithValidity(validity), signer.WithApproveRenewals(), signer.WithLogger(log)}})
	if err != nil {
		return nil, err
	}
	works := workinformers.NewSharedInformerFactory(c.work, 0)
	workSvc, err := workservice.New(c.work, works.Work().V1().ManifestWorks(), server.DefaultSourceID, workservice.WithLogger(log))
	if err != nil {
		return nil, err
	}
	srv, err := server.New(server.Config{TLS: server.TLSConfig{CertFile: p.serverCert, KeyFile: p.serverKey, ClientCAFile: p.caFile}},
		append(h.ServerOptions(),
			server.WithService(codec.ManifestBundlesDataType.String(), workSvc),
			server.WithAuthenticator(server.AnyAuthenticator(server.StaticAuthenticator{Tokens: tokens}, server.CertificateAuthenticator{})),
			server.WithAuthorizer(hub.Authorizer{Bootstrap: []string{"group:" + bootstrapGroup}}),
			server.WithLogger(log))...)
	if err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	r := &replica{srv: srv, addr: lis.Addr().String(), cancel: cancel}
	if err := h.Start(rctx); err != nil {
		cancel()
		_ = lis.Close()
		h.Close()
		return nil, err
	}
	works.Start(rctx.Done())
	r.wg.Go(func() { workSvc.Run(rctx) })
	r.wg.Go(func() {
		if err := srv.Serve(rctx, lis); err != nil {
			log.Error(err, "serve")
		}
	})
	r.wg.Go(func() {
		<-rctx.Done()
		h.Close()
		works.Shutdown()
	})
	return r, nil
}

// stop kills the replica: its streams and connections end at once.
func (r *replica) stop() {
	r.cancel()
	r.wg.Wait()
}

// controllers are the hub's own controllers of this example, over its
// kube-apiserver as OCM's are: an approver of bootstrap identities' CSRs,
// and an acceptor that accepts each new cluster, gives it a namespace and
// the lease its agent renews.
type controllers struct {
	c   hubClients
	out *printer
	wg  sync.WaitGroup
}

func startControllers(ctx context.Context, c hubClients, out *printer) (stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	kubeInf := informers.NewSharedInformerFactory(c.kube, 0)
	clusterInf := clusterinformers.NewSharedInformerFactory(c.cluster, 0)
	ctl := &controllers{c: c, out: out}
	work := make(chan func(), 1024)
	enqueue := func(f func()) {
		select {
		case work <- f:
		case <-ctx.Done():
		}
	}
	_, err = kubeInf.Certificates().V1().CertificateSigningRequests().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { enqueue(func() { ctl.approve(ctx, obj.(*certificatesv1.CertificateSigningRequest)) }) },
		UpdateFunc: func(_, obj any) {
			enqueue(func() { ctl.approve(ctx, obj.(*certificatesv1.CertificateSigningRequest)) })
		},
	})
	if err != nil {
		cancel()
		return nil, err
	}
	_, err = clusterInf.Cluster().V1().ManagedClusters().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { enqueue(func() { ctl.accept(ctx, obj.(*clusterv1.ManagedCluster)) }) },
	})
	if err != nil {
		cancel()
		return nil, err
	}
	ctl.wg.Go(func() {
		for {
			select {
			case f := <-work:
				f()
			case <-ctx.Done():
				return
			}
		}
	})
	kubeInf.Start(ctx.Done())
	clusterInf.Start(ctx.Done())
	return func() {
		cancel()
		ctl.wg.Wait()
		kubeInf.Shutdown()
		clusterInf.Shutdown()
	}, nil
}

// approve approves a pending CSR a bootstrap identity asked for (renewals
// the signer approves itself).
func (ctl *controllers) approve(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) {
	user := csr.Annotations[kubeservice.CSRUserAnnotation]
	if !strings.HasPrefix(user, "system:bootstrap:") || len(csr.Status.Conditions) > 0 {
		return
	}
	approved := csr.DeepCopy()
	approved.Status.Conditions = append(approved.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "ExampleApprover", Message: "a bootstrap token of this example", LastUpdateTime: metav1.Now()})
	if _, err := ctl.c.kube.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, approved, metav1.UpdateOptions{}); err != nil {
		if !apierrors.IsConflict(err) && ctx.Err() == nil {
			ctl.out.printf("hub: approving %s: %v\n", csr.Name, err)
		}
		return
	}
	ctl.out.printf("hub: approved CSR %s of %s\n", csr.Name, user)
}

// accept accepts a cluster, creates its namespace and its lease.
func (ctl *controllers) accept(ctx context.Context, mc *clusterv1.ManagedCluster) {
	name := mc.Name
	err := func() error {
		if _, err := ctl.c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := ctl.c.cluster.ClusterV1().ManagedClusters().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Spec.HubAcceptsClient = true
			_, err = ctl.c.cluster.ClusterV1().ManagedClusters().Update(ctx, cur, metav1.UpdateOptions{})
			return err
		}); err != nil {
			return err
		}
		_, err := ctl.c.kube.CoordinationV1().Leases(name).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: agent.LeaseName, Namespace: name}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = nil
		}
		return err
	}()
	if err != nil {
		if ctx.Err() == nil {
			ctl.out.printf("hub: accepting %s: %v\n", name, err)
		}
		return
	}
	ctl.out.printf("hub: accepted cluster %s (namespace and lease created)\n", name)
}

// printer serializes lines from many goroutines.
type printer struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
}

func (p *printer) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "%6.2fs  ", time.Since(p.start).Seconds())
	fmt.Fprintf(p.w, format, args...)
}

var errSteps = errors.New("not every step happened")
