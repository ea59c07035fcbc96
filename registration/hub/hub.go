// Package hub puts registration on a gRPC broker: the Services of
// ManagedClusters, CertificateSigningRequests, Leases, Events,
// ManagedClusterAddOns (v1alpha1 and v1beta1) and ServiceAccount token
// requests over a hub's kube-apiserver (registration/kubeservice),
// their informers, and optionally the signer of agents' certificates
// (registration/signer) — what a hub replica runs beside its gRPC server.
//
//	h, err := hub.New(hub.Config{Kube: kube, Cluster: clusters, AddOn: addons, CACert: ca, CAKey: key})
//	srv, err := server.New(cfg, append(h.ServerOptions(), server.WithAuthenticator(...))...)
//	err = h.Start(ctx) // informers synced, signer running
//	defer h.Close()
//
// Every replica of a hub may run one: each serves the agents connected to
// it from the kube-apiserver they share.
package hub

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	addonclient "open-cluster-management.io/api/client/addon/clientset/versioned"
	addoninformers "open-cluster-management.io/api/client/addon/informers/externalversions"
	clusterclient "open-cluster-management.io/api/client/cluster/clientset/versioned"
	clusterinformers "open-cluster-management.io/api/client/cluster/informers/externalversions"

	"github.com/workwire/sdk-go/options/grpc/server"
	"github.com/workwire/sdk-go/registration/kubeservice"
	"github.com/workwire/sdk-go/registration/signer"
)

// Config says what a Hub runs over.
type Config struct {
	// Kube, Cluster and AddOn are the hub's clients of its kube-apiserver,
	// whose ManagedClusterAddOn CRD serves v1alpha1, as every OCM hub's
	// does. Agents that speak v1beta1 (OCM v1.3's klusterlet) get add-ons
	// the Hub converts itself: the CRD needs no conversion webhook.
	// Required.
	Kube    kubernetes.Interface
	Cluster clusterclient.Interface
	AddOn   addonclient.Interface
	// SourceID is the server's Config.SourceID; default
	// server.DefaultSourceID.
	SourceID string
	// CACert and CAKey, PEM, make the Hub sign agents' approved
	// certificate requests with this CA. None: another actor signs them.
	CACert, CAKey []byte
	// SignerOptions configure the signer (validity, auto-approval, logger).
	SignerOptions []signer.Option
	// InformerResync is the informers' resync period; default 0, none.
	InformerResync time.Duration
	// ServiceOptions are given to every Service.
	ServiceOptions []kubeservice.Option
}

// Hub holds the Services and what they run on. Build it with New, give
// its ServerOptions to the gRPC server, Start it, Close it.
type Hub struct {
	kubeInf    informers.SharedInformerFactory
	clusterInf clusterinformers.SharedInformerFactory
	addonInf   addoninformers.SharedInformerFactory
	signer     *signer.Signer
	services   []server.Option

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New builds the Services (and the signer, with a CA). It does no network
// I/O.
func New(cfg Config) (*Hub, error) {
	h, err := build(cfg)
	if err != nil {
		return nil, fmt.Errorf("registration hub: %w", err)
	}
	return h, nil
}

func build(cfg Config) (*Hub, error) {
	if cfg.Kube == nil || cfg.Cluster == nil || cfg.AddOn == nil {
		return nil, errors.New("the Kube, Cluster and AddOn clients are required")
	}
	if cfg.SourceID == "" {
		cfg.SourceID = server.DefaultSourceID
	}
	h := &Hub{
		kubeInf:    informers.NewSharedInformerFactory(cfg.Kube, cfg.InformerResync),
		clusterInf: clusterinformers.NewSharedInformerFactory(cfg.Cluster, cfg.InformerResync),
		addonInf:   addoninformers.NewSharedInformerFactory(cfg.AddOn, cfg.InformerResync),
	}
	clusters, err := kubeservice.NewManagedClusters(cfg.Cluster, h.clusterInf.Cluster().V1().ManagedClusters(), cfg.SourceID, cfg.ServiceOptions...)
	if err != nil {
		return nil, err
	}
	csrs, err := kubeservice.NewCSRs(cfg.Kube, h.kubeInf.Certificates().V1().CertificateSigningRequests(), cfg.SourceID, cfg.ServiceOptions...)
	if err != nil {
		return nil, err
	}
	leases, err := kubeservice.NewLeases(cfg.Kube, h.kubeInf.Coordination().V1().Leases(), cfg.SourceID, cfg.ServiceOptions...)
	if err != nil {
		return nil, err
	}
	events, err := kubeservice.NewEvents(cfg.Kube, cfg.SourceID, cfg.ServiceOptions...)
	if err != nil {
		return nil, err
	}
	addons, err := kubeservice.NewAddOns(cfg.AddOn, h.addonInf.Addon().V1alpha1().ManagedClusterAddOns(), cfg.SourceID, cfg.ServiceOptions...)
	if err != nil {
		return nil, err
	}
	addonsV1beta1, err := kubeservice.NewAddOnsV1beta1(cfg.AddOn, h.addonInf.Addon().V1alpha1().ManagedClusterAddOns(), cfg.SourceID, cfg.ServiceOptions...)
	if err != nil {
		return nil, err
	}
	tokens, err := kubeservice.NewTokenRequests(cfg.Kube, cfg.SourceID, cfg.ServiceOptions...)
	if err != nil {
		return nil, err
	}
	h.services = []server.Option{
		server.WithService(kubeservice.ManagedClusterCodec.DataType().String(), clusters),
		server.WithService(kubeservice.CSRCodec.DataType().String(), csrs),
		server.WithService(kubeservice.LeaseCodec.DataType().String(), leases),
		server.WithService(kubeservice.EventCodec.DataType().String(), events),
		server.WithService(kubeservice.AddOnCodec.DataType().String(), addons),
		server.WithService(kubeservice.AddOnV1beta1Codec.DataType().String(), addonsV1beta1),
		server.WithService(kubeservice.TokenRequestCodec.DataType().String(), tokens),
	}
	if cfg.CACert != nil || cfg.CAKey != nil {
		if h.signer, err = signer.New(cfg.Kube, h.kubeInf.Certificates().V1().CertificateSigningRequests(), cfg.CACert, cfg.CAKey, cfg.SignerOptions...); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// ServerOptions register the Services with a gRPC server (server.New).
func (h *Hub) ServerOptions() []server.Option { return h.services }

// Start starts the informers and the signer, and returns once the
// informers synced or ctx ended. They run until Close.
func (h *Hub) Start(ctx context.Context) error {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	h.cancel = cancel
	for _, f := range []interface{ Start(<-chan struct{}) }{h.kubeInf, h.clusterInf, h.addonInf} {
		f.Start(runCtx.Done())
	}
	if h.signer != nil {
		h.wg.Go(func() { h.signer.Run(runCtx) })
	}
	for _, done := range []func(<-chan struct{}) bool{
		func(stop <-chan struct{}) bool { return allSynced(h.kubeInf.WaitForCacheSync(stop)) },
		func(stop <-chan struct{}) bool { return allSynced(h.clusterInf.WaitForCacheSync(stop)) },
		func(stop <-chan struct{}) bool { return allSynced(h.addonInf.WaitForCacheSync(stop)) },
	} {
		if !done(ctx.Done()) {
			return fmt.Errorf("registration hub: informers did not sync: %w", context.Cause(ctx))
		}
	}
	return nil
}

func allSynced[K comparable](m map[K]bool) bool {
	for _, ok := range m {
		if !ok {
			return false
		}
	}
	return true
}

// Close stops the informers and the signer and waits for them.
func (h *Hub) Close() {
	if h.cancel != nil {
		h.cancel()
	}
	h.wg.Wait()
	h.kubeInf.Shutdown()
	h.clusterInf.Shutdown()
	h.addonInf.Shutdown()
}
