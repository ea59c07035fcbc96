// Command registration shows OCM's registration over gRPC end to end,
// in one process: a hub (gRPC servers with the registration Services, the
// signer and the ManifestWork Service, over an in-process stand-in for a
// kube-apiserver, or a real one with -kubeconfig) and agents that join it
// with bootstrap tokens.
//
//	go run ./examples/registration
//
// It prints each step as it happens — the approver approves each agent's
// CSR, agents switch to their certificates, the hub accepts their clusters,
// their leases are renewed, their ManagedCluster status reaches the hub, a
// ManifestWork reaches each agent and its status comes back; a short
// certificate validity forces one rotation each, and a second work flows
// once the first certificates expired (the servers end connections at
// their certificate's expiry, so the agents are on their new ones); with
// -replicas 2 -kill-replica one server dies and a third work flows through
// the other — and exits 0 only when all of it happened.
//
// With -kubeconfig the hub needs OCM's ManagedCluster, ManagedClusterAddOn
// and ManifestWork CRDs installed.
package main

import (
	"context"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	addonclient "open-cluster-management.io/api/client/addon/clientset/versioned"
	clusterclient "open-cluster-management.io/api/client/cluster/clientset/versioned"
	workclient "open-cluster-management.io/api/client/work/clientset/versioned"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/examples/work-agent/agent"
	"github.com/workwire/sdk-go/examples/work-agent/fakecluster"
	"github.com/workwire/sdk-go/internal/testsupport/kubefake"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc"
	"github.com/workwire/sdk-go/options/grpc/server"
	"github.com/workwire/sdk-go/options/transporttest"
	regagent "github.com/workwire/sdk-go/registration/agent"
	"github.com/workwire/sdk-go/registration/clients"
	"github.com/workwire/sdk-go/work"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout)
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "registration:", err)
		os.Exit(1)
	}
}

type config struct {
	agents      int
	replicas    int
	killReplica bool
	validity    time.Duration
	timeout     time.Duration
	verbose     bool
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("registration", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "the hub's kube-apiserver, with OCM's CRDs (default: an in-process stand-in)")
	var cfg config
	fs.IntVar(&cfg.agents, "agents", 3, "how many clusters join")
	fs.IntVar(&cfg.replicas, "replicas", 1, "how many gRPC server replicas the hub runs (agents reach them through one failover address)")
	fs.BoolVar(&cfg.killReplica, "kill-replica", false, "kill the replica agents reach first, once all of them joined (needs -replicas 2 or more)")
	fs.DurationVar(&cfg.validity, "validity", 12*time.Second, "how long the agents' certificates are valid; they rotate at half of it")
	fs.DurationVar(&cfg.timeout, "timeout", 2*time.Minute, "give up after this long")
	fs.BoolVar(&cfg.verbose, "v", false, "log what the servers, signer and agents do")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var hub hubClients
	if *kubeconfig == "" {
		f := kubefake.NewHub()
		hub = hubClients{kube: f.Kube, cluster: f.Cluster, addon: f.AddOn, work: f.Work}
		fmt.Fprintln(out, "hub: over an in-process stand-in for a kube-apiserver (use -kubeconfig for a real one)")
	} else {
		restConfig, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
		if err != nil {
			return err
		}
		if hub, err = clientsFor(restConfig); err != nil {
			return err
		}
	}
	return runExample(ctx, hub, cfg, out)
}

func clientsFor(c *rest.Config) (hubClients, error) {
	var h hubClients
	var err error
	if h.kube, err = kubernetes.NewForConfig(c); err != nil {
		return h, err
	}
	if h.cluster, err = clusterclient.NewForConfig(c); err != nil {
		return h, err
	}
	if h.addon, err = addonclient.NewForConfig(c); err != nil {
		return h, err
	}
	h.work, err = workclient.NewForConfig(c)
	return h, err
}

// clusterState is what an agent went through, as the example saw it.
type clusterState struct {
	mu    sync.Mutex
	certs []*x509.Certificate
}

func (s *clusterState) addCert(c *x509.Certificate) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.certs = append(s.certs, c)
	return len(s.certs)
}

func (s *clusterState) certificates() []*x509.Certificate {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*x509.Certificate(nil), s.certs...)
}

func runExample(ctx context.Context, hub hubClients, cfg config, w io.Writer) error {
	if cfg.agents < 1 || cfg.replicas < 1 || cfg.killReplica && cfg.replicas < 2 {
		return fmt.Errorf("-agents %d, -replicas %d, -kill-replica %v: want at least one agent, one replica, and two to kill one", cfg.agents, cfg.replicas, cfg.killReplica)
	}
	if cfg.validity < 4*time.Second {
		return fmt.Errorf("-validity %v: want at least 4s", cfg.validity)
	}
	out := &printer{w: w, start: time.Now()}
	log := logr.Discard()
	if cfg.verbose {
		log = funcr.New(func(prefix, args string) { out.printf("%s %s\n", prefix, args) }, funcr.Options{Verbosity: 2})
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	dir, err := os.MkdirTemp("", "workwire-registration-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	pki, err := newPKI(dir)
	if err != nil {
		return err
	}

	// The hub: bootstrap tokens, replicas, one address for agents.
	clusters := make([]string, cfg.agents)
	tokens := map[string]server.Identity{}
	for i := range clusters {
		clusters[i] = fmt.Sprintf("cluster%d", i+1)
		tokens["token-"+clusters[i]] = server.Identity{User: "system:bootstrap:" + clusters[i], Groups: []string{bootstrapGroup}}
		if err := os.WriteFile(filepath.Join(dir, clusters[i]+".token"), []byte("token-"+clusters[i]), 0o600); err != nil {
			return err
		}
	}
	replicas := make([]*replica, cfg.replicas)
	for i := range replicas {
		r, err := startReplica(ctx, hub, pki, tokens, cfg.validity, log.WithName(fmt.Sprintf("replica%d", i)))
		if err != nil {
			return fmt.Errorf("replica %d: %w", i, err)
		}
		replicas[i] = r
		defer r.stop()
	}
	addr := replicas[0].addr
	// Several replicas are reached through one address, as through a
	// Kubernetes Service: connections take turns among them.
	var lb *transporttest.Proxy
	if cfg.replicas > 1 {
		backends := make([]string, len(replicas))
		for i, r := range replicas {
			backends[i] = r.addr
		}
		if lb, err = transporttest.NewProxy(backends[0], backends[1:]...); err != nil {
			return err
		}
		defer func() { _ = lb.Close() }()
		addr = lb.Addr()
	}
	out.printf("hub: %d gRPC server replica(s), agents connect to %s; certificates valid %v\n", cfg.replicas, addr, cfg.validity)
	stopControllers, err := startControllers(ctx, hub, out)
	if err != nil {
		return err
	}
	defer stopControllers()

	// The agents.
	states := make(map[string]*clusterState, len(clusters))
	var agents sync.WaitGroup
	agentCtx, stopAgents := context.WithCancel(ctx)
	defer func() { stopAgents(); agents.Wait() }()
	errs := make(chan error, len(clusters))
	for _, name := range clusters {
		state := &clusterState{}
		states[name] = state
		boot := grpc.Config{ServerAddress: addr, TLS: options.TLSConfig{CAFile: pki.caFile}, TokenFile: filepath.Join(dir, name+".token"),
			ReconnectMinBackoff: options.Duration(50 * time.Millisecond), ReconnectMaxBackoff: options.Duration(time.Second)}
		a, err := regagent.New(regagent.Config{
			ClusterName: name, AgentName: "agent", Bootstrap: boot, CertDir: filepath.Join(dir, name),
			LeaseDurationSeconds: 1, Rotation: 0.5, Logger: log.WithName(name),
			OnCertificate: func(c *x509.Certificate, took time.Duration) {
				if n := state.addCert(c); n == 1 {
					out.printf("%s: certificate issued in %v, valid until %s\n", name, took.Round(time.Millisecond), c.NotAfter.Format(time.TimeOnly))
				} else {
					out.printf("%s: certificate rotated in %v, valid until %s\n", name, took.Round(time.Millisecond), c.NotAfter.Format(time.TimeOnly))
				}
			},
		})
		if err != nil {
			return err
		}
		agents.Go(func() {
			if err := runAgent(agentCtx, a, name, out, log); err != nil && agentCtx.Err() == nil {
				errs <- fmt.Errorf("%s: %w", name, err)
			}
		})
	}

	// What the hub sees.
	check := func(what string, cond func(ctx context.Context) (bool, error)) error {
		for {
			ok, err := cond(ctx)
			if err != nil && ctx.Err() == nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			if ok {
				return nil
			}
			select {
			case err := <-errs:
				return err
			case <-ctx.Done():
				return fmt.Errorf("%w: %s: %w", errSteps, what, context.Cause(ctx))
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	for _, name := range clusters {
		if err := check(name+" joined and reported its status", func(ctx context.Context) (bool, error) {
			mc, err := hub.cluster.ClusterV1().ManagedClusters().Get(ctx, name, metav1.GetOptions{})
			return err == nil && meta.IsStatusConditionTrue(mc.Status.Conditions, clusterv1.ManagedClusterConditionJoined), nil
		}); err != nil {
			return err
		}
		out.printf("hub: %s's status reached the hub (Joined)\n", name)
	}
	for _, name := range clusters {
		var first *metav1.MicroTime
		if err := check(name+"'s lease renewed", func(ctx context.Context) (bool, error) {
			l, err := hub.kube.CoordinationV1().Leases(name).Get(ctx, regagent.LeaseName, metav1.GetOptions{})
			if err != nil || l.Spec.RenewTime == nil {
				return false, nil
			}
			if first == nil {
				first = l.Spec.RenewTime
			}
			return l.Spec.RenewTime.After(first.Time), nil
		}); err != nil {
			return err
		}
		out.printf("hub: %s's lease renewed\n", name)
	}
	if err := deliver(ctx, hub, clusters, "hello", out, check); err != nil {
		return err
	}
	var expiry time.Time
	for _, name := range clusters {
		if err := check(name+" rotated its certificate", func(context.Context) (bool, error) {
			return len(states[name].certificates()) >= 2, nil
		}); err != nil {
			return err
		}
		if first := states[name].certificates()[0]; first.NotAfter.After(expiry) {
			expiry = first.NotAfter
		}
	}
	if err := check("the first certificates expired", func(context.Context) (bool, error) { return time.Now().After(expiry), nil }); err != nil {
		return err
	}
	out.printf("hub: every agent's first certificate has expired\n")
	if err := deliver(ctx, hub, clusters, "after-rotation", out, check); err != nil {
		return err
	}
	if cfg.killReplica {
		for i, r := range replicas {
			out.printf("hub: replica %d serves %d subscriptions\n", i, r.srv.Subscribers())
		}
		lb.Kill(replicas[0].addr)
		replicas[0].stop()
		out.printf("hub: replica 0 killed: its connections dropped\n")
		if err := deliver(ctx, hub, clusters, "after-failover", out, check); err != nil {
			return err
		}
		killed := time.Now()
		for _, name := range clusters {
			if err := check(name+"'s lease renewed through the live replica", func(ctx context.Context) (bool, error) {
				l, err := hub.kube.CoordinationV1().Leases(name).Get(ctx, regagent.LeaseName, metav1.GetOptions{})
				return err == nil && l.Spec.RenewTime != nil && l.Spec.RenewTime.After(killed), nil
			}); err != nil {
				return err
			}
		}
		out.printf("hub: every agent renewed its lease through replica 1, which serves %d subscriptions\n", replicas[1].srv.Subscribers())
	}
	out.printf("all steps done: %d clusters joined, rotated and took their works\n", len(clusters))
	return nil
}

// runAgent joins the hub, then runs the agent's registration, reports its
// cluster's status, and applies its works (to an in-memory cluster), until
// ctx ends.
func runAgent(ctx context.Context, a *regagent.Agent, name string, out *printer, log logr.Logger) error {
	began := time.Now()
	hubConfig, err := a.Join(ctx)
	if err != nil {
		return err
	}
	out.printf("%s: joined in %v; switching to its certificate\n", name, time.Since(began).Round(time.Millisecond))
	// What runAgent starts ends when it returns, on an error too.
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	errs := make(chan error, 3)
	wg.Go(func() { errs <- a.Run(ctx) })

	status, err := clients.New(hubConfig, name, clients.WithTypes(clients.ManagedClusters), clients.WithLogger(log))
	if err != nil {
		return err
	}
	if err := status.Start(ctx); err != nil {
		return err
	}
	defer func() { _ = status.Close(context.WithoutCancel(ctx)) }()
	if err := reportJoined(ctx, status, name); err != nil {
		return err
	}

	holder, err := work.NewClientHolderBuilder(hubConfig).WithClusterName(name).WithLogger(log).NewClientHolder()
	if err != nil {
		return err
	}
	cluster := fakecluster.New()
	wg.Go(func() {
		errs <- agent.Run(ctx, agent.Config{Holder: holder, Cluster: name, Client: cluster.Client, Mapper: cluster.Mapper}, io.Discard)
	})
	select {
	case err := <-errs:
		if ctx.Err() != nil {
			return nil
		}
		return err
	case <-ctx.Done():
		return nil
	}
}

// reportJoined sets the cluster's Joined condition once the hub holds it.
func reportJoined(ctx context.Context, c *clients.Clients, name string) error {
	clusters := c.ClusterClient().ClusterV1().ManagedClusters()
	return retry.OnError(retry.DefaultBackoff, func(error) bool { return ctx.Err() == nil }, func() error {
		mc, err := clusters.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		mc = mc.DeepCopy()
		meta.SetStatusCondition(&mc.Status.Conditions, metav1.Condition{Type: clusterv1.ManagedClusterConditionJoined, Status: metav1.ConditionTrue, Reason: "ManagedClusterJoined", Message: "joined over gRPC"})
		_, err = clusters.UpdateStatus(ctx, mc, metav1.UpdateOptions{})
		return err
	})
}

// deliver creates a ManifestWork of name in each cluster on the hub and
// waits until each agent applied it.
func deliver(ctx context.Context, hub hubClients, clusters []string, name string, out *printer, check func(string, func(context.Context) (bool, error)) error) error {
	for _, c := range clusters {
		cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Data: map[string]string{"from": "the hub"}}
		mw := &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c},
			Spec: workv1.ManifestWorkSpec{Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{{RawExtension: runtime.RawExtension{Object: cm}}}}}}
		if _, err := hub.work.WorkV1().ManifestWorks(c).Create(ctx, mw, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create work %s/%s: %w", c, name, err)
		}
	}
	out.printf("hub: ManifestWork %q created for every cluster\n", name)
	for _, c := range clusters {
		if err := check(fmt.Sprintf("work %s/%s applied", c, name), func(ctx context.Context) (bool, error) {
			mw, err := hub.work.WorkV1().ManifestWorks(c).Get(ctx, name, metav1.GetOptions{})
			return err == nil && meta.IsStatusConditionTrue(mw.Status.Conditions, workv1.WorkApplied), nil
		}); err != nil {
			return err
		}
	}
	out.printf("hub: ManifestWork %q applied on every cluster\n", name)
	return nil
}
