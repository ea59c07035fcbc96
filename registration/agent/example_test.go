package agent_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/internal/testsupport/kubefake"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc"
	"github.com/workwire/sdk-go/options/grpc/server"
	"github.com/workwire/sdk-go/registration/agent"
	"github.com/workwire/sdk-go/registration/hub"
	"github.com/workwire/sdk-go/registration/kubeservice"
	"github.com/workwire/sdk-go/registration/signer"
	"github.com/workwire/sdk-go/work"
	"github.com/workwire/sdk-go/work/storeservice"
	"github.com/workwire/sdk-go/work/workstore"
)

// The cluster side of registration: the agent joins the hub with a
// bootstrap token, and Join returns the config of the identity the hub
// gave it, a client certificate, which everything else the cluster runs
// connects with (here the work agent, which gets the hub's works). Run
// keeps the agent registered: it renews the cluster's lease and rotates the
// certificate. The hub, set up by startInProcessHub, signs the certificate at once;
// a real hub waits for an approver.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir, err := os.MkdirTemp("", "workwire-agent-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	bootstrap, stopHub, err := startInProcessHub(ctx, dir)
	if err != nil {
		panic(err)
	}
	defer stopHub()

	registration, err := agent.New(agent.Config{
		ClusterName: "cluster1",
		AgentName:   "agent1",
		Bootstrap:   bootstrap,
		CertDir:     filepath.Join(dir, "cluster1"), // kept across restarts: a valid certificate skips the bootstrap
		Logger:      logr.Discard(),
	})
	if err != nil {
		panic(err)
	}
	hubConfig, err := registration.Join(ctx)
	if err != nil {
		panic(err)
	}
	identity, err := tls.LoadX509KeyPair(hubConfig.TLS.CertFile, hubConfig.TLS.KeyFile)
	if err != nil {
		panic(err)
	}
	fmt.Println("joined cluster1 as", identity.Leaf.Subject.CommonName)

	runCtx, stopRun := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- registration.Run(runCtx) }()
	defer func() { stopRun(); <-ran }()

	works, err := work.NewClientHolderBuilder(hubConfig).WithClusterName("cluster1").WithLogger(logr.Discard()).NewClientHolder()
	if err != nil {
		panic(err)
	}
	if err := works.Start(ctx); err != nil {
		panic(err)
	}
	defer works.Close(context.Background())
	for {
		w, err := works.ManifestWorkInformer().Lister().ManifestWorks("cluster1").Get("hello")
		if err == nil {
			fmt.Println("cluster1 received work", w.Name)
			break
		}
		if !apierrors.IsNotFound(err) {
			panic(err)
		}
		select {
		case <-ctx.Done():
			panic(ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	// Output:
	// joined cluster1 as system:open-cluster-management:cluster1:agent1
	// cluster1 received work hello
}

// startInProcessHub stands up, in this process, the hub side of registration over
// gRPC: the registration Services and the signer (registration/hub) over a
// stand-in for a kube-apiserver (this module's kubefake; a real hub gives
// hub.Config the clients of its kube-apiserver), and a gRPC broker with
// mutual TLS that knows one bootstrap token and serves works from a store
// holding one work for cluster1. It returns the bootstrap config of
// cluster1's agent, and stop, which stops the hub and waits for it.
func startInProcessHub(ctx context.Context, dir string) (bootstrap grpc.Config, stop func(), err error) {
	pki, err := newPKI(dir)
	if err != nil {
		return grpc.Config{}, nil, err
	}
	// The token cluster1's agent joins with: its file is what an operator
	// hands the cluster.
	const token, tokenUser = "cluster1.secret", "system:bootstrap:cluster1"
	kube := kubefake.NewHub()
	registration, err := hub.New(hub.Config{
		Kube: kube.Kube, Cluster: kube.Cluster, AddOn: kube.AddOn,
		CACert: pki.caCert, CAKey: pki.caKey,
		SignerOptions:  []signer.Option{signer.WithAutoApprove(tokenUser)},
		ServiceOptions: []kubeservice.Option{kubeservice.WithLogger(logr.Discard())},
	})
	if err != nil {
		return grpc.Config{}, nil, err
	}
	store := workstore.NewMemory()
	if _, err := store.Create(ctx, helloWork("cluster1")); err != nil {
		return grpc.Config{}, nil, err
	}
	works, err := storeservice.New(store, server.DefaultSourceID, storeservice.WithLogger(logr.Discard()))
	if err != nil {
		return grpc.Config{}, nil, err
	}
	srv, err := server.New(server.Config{TLS: server.TLSConfig{CertFile: pki.serverCert, KeyFile: pki.serverKey, ClientCAFile: pki.caFile}},
		append(registration.ServerOptions(),
			server.WithService(codec.ManifestBundlesDataType.String(), works),
			server.WithAuthenticator(server.AnyAuthenticator(
				server.StaticAuthenticator{Tokens: map[string]server.Identity{token: {User: tokenUser, Groups: []string{"system:bootstrappers"}}}},
				server.CertificateAuthenticator{})),
			server.WithAuthorizer(hub.Authorizer{Bootstrap: []string{"group:system:bootstrappers"}}),
			server.WithLogger(logr.Discard()))...)
	if err != nil {
		return grpc.Config{}, nil, err
	}
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		return grpc.Config{}, nil, err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return grpc.Config{}, nil, err
	}
	if err := registration.Start(ctx); err != nil {
		_ = lis.Close()
		registration.Close()
		return grpc.Config{}, nil, err
	}
	serveCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var serving sync.WaitGroup
	watching := make(chan struct{})
	serving.Go(func() { _ = works.Run(serveCtx, watching) })
	serving.Go(func() { _ = srv.Serve(serveCtx, lis) })
	<-watching
	stop = func() {
		cancel()
		serving.Wait()
		registration.Close()
	}
	return grpc.Config{ServerAddress: lis.Addr().String(), TLS: options.TLSConfig{CAFile: pki.caFile}, TokenFile: tokenFile}, stop, nil
}

// helloWork is a work of cluster that puts one ConfigMap on it.
func helloWork(cluster string) *workv1.ManifestWork {
	return &workv1.ManifestWork{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: cluster},
		Spec: workv1.ManifestWorkSpec{Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{{
			RawExtension: runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"hello","namespace":"default"}}`)},
		}}}},
	}
}

// hubPKI is the hub's CA, which signs agents' certificates and verifies
// them, and the broker's serving certificate it issued; files in a
// directory, PEM.
type hubPKI struct {
	caCert, caKey         []byte
	caFile                string
	serverCert, serverKey string
}

func newPKI(dir string) (*hubPKI, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTemplate := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "example hub CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	serverKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serverDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "hub"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}, ca, &serverKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	p := &hubPKI{
		caCert:     pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		caFile:     filepath.Join(dir, "ca.pem"),
		serverCert: filepath.Join(dir, "server.pem"),
		serverKey:  filepath.Join(dir, "server-key.pem"),
	}
	if p.caKey, err = ecKeyPEM(caKey); err != nil {
		return nil, err
	}
	serverKeyPEM, err := ecKeyPEM(serverKey)
	if err != nil {
		return nil, err
	}
	for path, data := range map[string][]byte{
		p.caFile:     p.caCert,
		p.serverCert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: serverDER}),
		p.serverKey:  serverKeyPEM,
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func ecKeyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}
