package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	addonclient "open-cluster-management.io/api/client/addon/clientset/versioned"
	clusterclient "open-cluster-management.io/api/client/cluster/clientset/versioned"
	workclient "open-cluster-management.io/api/client/work/clientset/versioned"
	workinformers "open-cluster-management.io/api/client/work/informers/externalversions"

	"github.com/workwire/sdk-go/cmd/workwire/internal/cli"
	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/options/grpc/server"
	"github.com/workwire/sdk-go/options/grpc/server/kubeauth"
	registrationhub "github.com/workwire/sdk-go/registration/hub"
	regkubeservice "github.com/workwire/sdk-go/registration/kubeservice"
	"github.com/workwire/sdk-go/registration/signer"
	workkubeservice "github.com/workwire/sdk-go/work/kubeservice"
	"github.com/workwire/sdk-go/work/pgstore"
	"github.com/workwire/sdk-go/work/storeservice"
)

// broker is one run of the program: its server, its Services and what
// they run on, and its admin port.
type broker struct {
	f      *flags
	cfg    server.Config
	log    logr.Logger
	srv    *server.Server
	reg    *prometheus.Registry
	ready  atomic.Bool
	starts []func(ctx context.Context) error // each returns once synced
	runs   []func(ctx context.Context) error // each until ctx ends, or it fails
	closes []func()
}

func newBroker(ctx context.Context, cfg server.Config, f *flags, p plan, kubeCfg *rest.Config, log logr.Logger) (*broker, error) {
	b := &broker{f: f, cfg: cfg, log: log, reg: prometheus.NewRegistry()}
	b.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	opts := []server.Option{server.WithLogger(log), server.WithRegisterer(b.reg)}

	var kube kubernetes.Interface
	if kubeCfg != nil {
		var err error
		if kube, err = kubernetes.NewForConfig(kubeCfg); err != nil {
			return nil, cli.Usagef("kube-apiserver client: %v", err)
		}
	}
	sourceID := cfg.SourceID
	if sourceID == "" {
		sourceID = server.DefaultSourceID
	}
	if p.kubeServices {
		works, err := workclient.NewForConfig(kubeCfg)
		if err != nil {
			return nil, cli.Usagef("kube-apiserver client: %v", err)
		}
		factory := workinformers.NewSharedInformerFactory(works, 0)
		svc, err := workkubeservice.New(works, factory.Work().V1().ManifestWorks(), sourceID, workkubeservice.WithLogger(log.WithName("works")))
		if err != nil {
			return nil, err
		}
		opts = append(opts, server.WithService(codec.ManifestBundlesDataType.String(), svc))
		// The informers run until the broker has drained, which begins
		// when the run's context ends.
		informersStop := make(chan struct{})
		b.starts = append(b.starts, func(ctx context.Context) error {
			factory.Start(informersStop)
			for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
				if !ok {
					return fmt.Errorf("the informer of %v did not sync", typ)
				}
			}
			return nil
		})
		b.runs = append(b.runs, func(ctx context.Context) error { svc.Run(ctx); return nil })
		b.closes = append(b.closes, func() { close(informersStop); factory.Shutdown() })
	}
	if p.registration {
		h, err := f.registrationHub(kubeCfg, kube, sourceID, log)
		if err != nil {
			return nil, err
		}
		opts = append(opts, h.ServerOptions()...)
		b.starts = append(b.starts, h.Start)
		b.closes = append(b.closes, h.Close)
	}
	if f.services == "postgres" {
		poolCfg, err := pgxpool.ParseConfig(f.postgresDSN)
		if err != nil {
			return nil, cli.Usagef("-postgres-dsn: %v", err)
		}
		pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
		if err != nil {
			return nil, cli.Usagef("-postgres-dsn: %v", err)
		}
		b.closes = append(b.closes, pool.Close)
		store, err := pgstore.Open(ctx, pool)
		if err != nil {
			pool.Close()
			return nil, err
		}
		svc, err := storeservice.New(store, sourceID, storeservice.WithLogger(log.WithName("works")))
		if err != nil {
			pool.Close()
			return nil, err
		}
		opts = append(opts, server.WithService(codec.ManifestBundlesDataType.String(), svc))
		watching, failed := make(chan struct{}), make(chan struct{})
		b.runs = append(b.runs, func(ctx context.Context) error {
			defer close(failed)
			if err := svc.Run(ctx, watching); err != nil {
				return fmt.Errorf("the watch of the works' database: %w", err)
			}
			return nil
		})
		b.starts = append(b.starts, func(ctx context.Context) error {
			select {
			case <-watching:
				return nil
			case <-failed:
				return errors.New("the watch of the works' database ended before it began")
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}

	authn, err := authenticator(p, kube)
	if err != nil {
		return nil, err
	}
	if authn != nil {
		opts = append(opts, server.WithAuthenticator(authn))
	} else {
		log.Info("every caller is trusted (-authn=none): for tests and trusted networks only")
	}
	if authz := authorizer(p, f, kube); authz != nil {
		opts = append(opts, server.WithAuthorizer(authz))
	} else {
		log.Info("every authenticated caller may act as any source and any cluster's agent (-authz=none)")
	}
	srv, err := server.New(cfg, opts...)
	if err != nil {
		return nil, cli.UsageError{Err: fmt.Errorf("config %s: %w", f.config, err)}
	}
	b.srv = srv
	return b, nil
}

func (f *flags) registrationHub(kubeCfg *rest.Config, kube kubernetes.Interface, sourceID string, log logr.Logger) (*registrationhub.Hub, error) {
	clusters, err := clusterclient.NewForConfig(kubeCfg)
	if err != nil {
		return nil, cli.Usagef("kube-apiserver client: %v", err)
	}
	addons, err := addonclient.NewForConfig(kubeCfg)
	if err != nil {
		return nil, cli.Usagef("kube-apiserver client: %v", err)
	}
	hc := registrationhub.Config{Kube: kube, Cluster: clusters, AddOn: addons, SourceID: sourceID,
		ServiceOptions: []regkubeservice.Option{regkubeservice.WithLogger(log.WithName("registration"))}}
	if f.signerCert != "" {
		if hc.CACert, err = os.ReadFile(f.signerCert); err != nil {
			return nil, cli.Usagef("-signer-ca-cert: %v", err)
		}
		if hc.CAKey, err = os.ReadFile(f.signerKey); err != nil {
			return nil, cli.Usagef("-signer-ca-key: %v", err)
		}
		hc.SignerOptions = append(hc.SignerOptions, signer.WithLogger(log.WithName("signer")), signer.WithApproveRenewals())
		if f.signerValidity > 0 {
			hc.SignerOptions = append(hc.SignerOptions, signer.WithValidity(f.signerValidity))
		}
		if users := split(f.autoApprove); len(users) > 0 {
			hc.SignerOptions = append(hc.SignerOptions, signer.WithAutoApprove(users...))
		}
	}
	h, err := registrationhub.New(hc)
	if err != nil {
		return nil, cli.UsageError{Err: err} // a bad CA pair
	}
	return h, nil
}

func authenticator(p plan, kube kubernetes.Interface) (server.Authenticator, error) {
	var as []server.Authenticator
	for _, a := range p.authn {
		switch a {
		case "cert":
			as = append(as, server.CertificateAuthenticator{})
		case "tokenreview":
			as = append(as, kubeauth.NewTokenReview(kube))
		case "none":
			return nil, nil
		}
	}
	if len(as) == 1 {
		return as[0], nil
	}
	return server.AnyAuthenticator(as...), nil
}

func authorizer(p plan, f *flags, kube kubernetes.Interface) server.Authorizer {
	switch p.authz {
	case "rbac":
		return kubeauth.NewSubjectAccessReview(kube, kubeauth.ResourceAttributes)
	case "registration":
		var bootstrap []string
		for _, g := range split(f.bootstrapGroups) {
			bootstrap = append(bootstrap, "group:"+g)
		}
		return registrationhub.Authorizer{Bootstrap: bootstrap, Next: kubeauth.NewSubjectAccessReview(kube, kubeauth.ResourceAttributes)}
	}
	return nil
}

// run serves until ctx ends, then drains.
func (b *broker) run(ctx context.Context) error {
	lis, err := net.Listen("tcp", b.listenAddress())
	if err != nil {
		return err
	}
	admin, err := net.Listen("tcp", b.f.adminAddress)
	if err != nil {
		lis.Close()
		return fmt.Errorf("admin port: %w", err)
	}
	adminSrv := &http.Server{Handler: b.adminHandler(), ReadHeaderTimeout: 10 * time.Second}
	adminDone := make(chan error, 1)
	go func() { adminDone <- adminSrv.Serve(admin) }()
	b.log.Info("admin port", "address", admin.Addr().String(), "pprof", b.f.pprof)

	svcCtx, stopServices := context.WithCancel(context.Background())
	var services sync.WaitGroup
	stop := func() {
		stopServices()
		services.Wait()
		for i := len(b.closes) - 1; i >= 0; i-- {
			b.closes[i]()
		}
	}
	// The Services run first: each waits for what it runs on to sync.
	failed := make(chan error, len(b.runs))
	for _, run := range b.runs {
		services.Go(func() {
			if err := run(svcCtx); err != nil {
				failed <- err
			}
		})
	}
	for _, start := range b.starts {
		if err := start(ctx); err != nil {
			select {
			case err = <-failed: // the cause
			default:
			}
			stop()
			lis.Close()
			adminSrv.Close()
			if ctx.Err() != nil {
				return nil // stopped before it was ready
			}
			return fmt.Errorf("start services: %w", err)
		}
	}

	serveCtx, stopServing := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- b.srv.Serve(serveCtx, lis) }()
	b.ready.Store(true)
	b.log.Info("ready", "services", b.f.services, "registration", b.f.services == "kube" && b.f.registration)

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
		served <- serveErr
	case err := <-adminDone:
		adminDone <- err
		serveErr = fmt.Errorf("admin port: %w", err)
	case serveErr = <-failed:
	}
	b.ready.Store(false)
	b.log.Info("draining", "shutdownTimeout", b.f.shutdownTimeout)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		stopServing()
		if err := <-served; err != nil && serveErr == nil {
			serveErr = err
		}
		stop()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), b.f.shutdownTimeout)
		defer cancel()
		adminSrv.Shutdown(shutdownCtx)
	}()
	select {
	case <-drained:
	case <-time.After(b.f.shutdownTimeout):
		return fmt.Errorf("drain did not end within -shutdown-timeout %s", b.f.shutdownTimeout)
	}
	if serveErr != nil {
		return serveErr
	}
	b.log.Info("drained")
	return nil
}

func (b *broker) listenAddress() string {
	if b.cfg.ListenAddress != "" {
		return b.cfg.ListenAddress
	}
	return server.DefaultListenAddress
}
