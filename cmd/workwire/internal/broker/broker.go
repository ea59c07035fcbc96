// Package broker is `workwire broker`: workwire's gRPC broker
// (options/grpc/server) as a service an operator installs, with the
// Services of ManifestWorks over a hub's kube-apiserver (and registration,
// for agents that join over gRPC) or over PostgreSQL, an admin port for
// health, readiness, metrics and the pending debug endpoint, and a drain
// on SIGTERM.
package broker

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/workwire/sdk-go/cmd/workwire/internal/cli"
	"github.com/workwire/sdk-go/options/grpc/server"
)

const long = `
Broker runs workwire's gRPC broker. Sources and agents connect to it with
the gRPC transport (options/grpc), OCM's agents as well; it serves the
ManifestWorks of a hub's kube-apiserver (-services kube, with registration
for agents that join over gRPC) or of a PostgreSQL database (-services
postgres), and routes what other sources and agents publish (all it does
with -services none).

The config file is the broker's (listenAddress, tls, heartbeatInterval, ...),
in workwire's keys or those of OCM's server config file.

The admin port serves /healthz, /readyz (ready once every Service's cache
is synced, and no longer once it drains), /metrics and
/debug/workwire/pending, and /debug/pprof/ with -pprof. It binds to loopback
unless -admin-address says otherwise: what it serves names clusters and
works.

SIGTERM or SIGINT drains the broker: it stops being ready and accepting
connections, ends every subscription with Unavailable (agents reconnect,
to another replica behind the same address), lets calls in flight finish,
stops its Services and exits 0, or 1 if that takes longer than
-shutdown-timeout.`

// Command is `workwire broker`.
func Command() *cli.Command {
	return &cli.Command{
		Name:  "broker",
		Usage: "-config FILE [flags]",
		Short: "run the gRPC broker, serving works from a kube-apiserver or PostgreSQL",
		Long:  long,
		Flags: cli.FlagsOnly(func() *flags { return &flags{} }),
	}
}

type flags struct {
	config          string
	services        string
	kubeconfig      string
	kubeQPS         float64
	kubeBurst       int
	registration    bool
	signerCert      string
	signerKey       string
	signerValidity  time.Duration
	autoApprove     string
	postgresDSN     string
	authn           string
	authz           string
	bootstrapGroups string
	adminAddress    string
	pprof           bool
	shutdownTimeout time.Duration
	tlsProfile      string
	tlsMinVersion   string
	tlsCipherSuites string
	logging         cli.Logging
}

// Register implements cli.Runner.
func (f *flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.config, "config", "", "the broker's config file, YAML or JSON (required)")
	fs.StringVar(&f.services, "services", "kube", "where the works are: kube (a kube-apiserver's ManifestWorks), postgres, or none (the broker only routes between sources and agents that connect to it)")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "the hub's kubeconfig; default $KUBECONFIG, else the in-cluster config. With -services postgres or none, used only for token and access reviews")
	fs.Float64Var(&f.kubeQPS, "kube-api-qps", 50, "requests a second to the kube-apiserver")
	fs.IntVar(&f.kubeBurst, "kube-api-burst", 100, "burst of requests to the kube-apiserver")
	fs.BoolVar(&f.registration, "registration", true, "with -services kube, also serve registration: ManagedClusters, CSRs, leases, events, add-ons and token requests")
	fs.StringVar(&f.signerCert, "signer-ca-cert", "", "PEM CA certificate that signs agents' approved CSRs of the gRPC signer; none: another actor signs them")
	fs.StringVar(&f.signerKey, "signer-ca-key", "", "PEM key of -signer-ca-cert")
	fs.DurationVar(&f.signerValidity, "signer-validity", 0, "validity of the certificates the signer issues (default 720h)")
	fs.StringVar(&f.autoApprove, "signer-auto-approve", "", "comma-separated users (bootstrap identities) whose agents' CSRs the signer approves itself")
	fs.StringVar(&f.postgresDSN, "postgres-dsn", "", "with -services postgres, the database (a URL or key=value DSN; PG* environment variables fill in what it omits, PGPASSWORD among them)")
	fs.StringVar(&f.authn, "authn", "", "comma-separated authenticators: cert (client certificates verified by tls.clientCAFile), tokenreview (bearer tokens, by the kube-apiserver), or none to trust every caller; default: cert if tls.clientCAFile is set, and tokenreview if there is a kube-apiserver")
	fs.StringVar(&f.authz, "authz", "", "authorizer: rbac (SubjectAccessReviews, type by type, as OCM's hub asks), registration (agents' certificates act for their cluster, -bootstrap-groups may join, the rest as rbac) or none; default: registration with registration on, else rbac")
	fs.StringVar(&f.bootstrapGroups, "bootstrap-groups", "system:bootstrappers", "with -authz registration, comma-separated groups whose members may create a ManagedCluster and CSRs, and nothing else")
	fs.StringVar(&f.adminAddress, "admin-address", "127.0.0.1:8080", "address of the admin port: /healthz, /readyz, /metrics, /debug/")
	fs.BoolVar(&f.pprof, "pprof", false, "serve /debug/pprof/ on the admin port")
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long a drain may take before the broker exits 1")
	fs.StringVar(&f.tlsProfile, "tls-profile", "", "OCM's TLS profile ConfigMap (ocm-tls-profile: minTLSVersion, cipherSuites), where it is mounted or as a manifest file; its settings replace the config file's")
	fs.StringVar(&f.tlsMinVersion, "tls-min-version", "", "the lowest TLS version accepted, as OCM's programs take it: VersionTLS12 or VersionTLS13; over -tls-profile and the config file")
	fs.StringVar(&f.tlsCipherSuites, "tls-cipher-suites", "", "TLS 1.2's cipher suites accepted, comma-separated IANA names, as OCM's programs take them; over -tls-profile and the config file")
	f.logging.Register(fs)
}

// run checks everything it can before it listens, so that a bad flag or
// config file exits 2 with nothing bound.
// Run implements cli.Runner.
func (f *flags) Run(ctx context.Context, env *cli.Env) error {
	log, err := f.logging.Logger(env.Stderr)
	if err != nil {
		return err
	}
	if f.config == "" {
		return cli.Required("config")
	}
	cfg, err := server.LoadConfig(f.config)
	if err != nil {
		return cli.UsageError{Err: err}
	}
	if cfg.TLS, err = f.tls(cfg.TLS); err != nil {
		return cli.UsageError{Err: err}
	}
	if f.shutdownTimeout <= 0 {
		return cli.Usagef("-shutdown-timeout %s: want more than 0", f.shutdownTimeout)
	}
	if f.pprof && !isLoopback(f.adminAddress) {
		log.Info("pprof is served on an admin port that is not loopback", "adminAddress", f.adminAddress)
	}
	if f.services != "kube" && f.services != "postgres" && f.services != "none" {
		return cli.Usagef("-services %q: want kube, postgres or none", f.services)
	}
	kube, err := f.kubeConfig()
	if err != nil {
		return err
	}
	p, err := f.plan(cfg, kube != nil)
	if err != nil {
		return err
	}
	b, err := newBroker(ctx, cfg, f, p, kube, log)
	if err != nil {
		return err
	}
	return b.run(ctx)
}

// tls is c with the TLS profile and flags applied, in that order, as OCM's
// programs apply theirs over their config file, and checked again.
func (f *flags) tls(c server.TLSConfig) (server.TLSConfig, error) {
	var err error
	if f.tlsProfile != "" {
		p, err := server.LoadTLSProfile(f.tlsProfile)
		if err != nil {
			return c, err
		}
		if c, err = c.WithProfile(p); err != nil {
			return c, fmt.Errorf("-tls-profile %s: %w", f.tlsProfile, err)
		}
	}
	if c, err = c.WithProfile(server.TLSProfile{MinVersion: f.tlsMinVersion, CipherSuites: f.tlsCipherSuites}); err != nil {
		return c, fmt.Errorf("-tls-min-version: %w", err)
	}
	if f.tlsProfile == "" && f.tlsMinVersion == "" && f.tlsCipherSuites == "" {
		return c, nil
	}
	if _, err := c.Build(); err != nil {
		return c, fmt.Errorf("TLS, with -tls-profile, -tls-min-version and -tls-cipher-suites applied: %w", err)
	}
	return c, nil
}

// plan is what the flags ask for, checked.
type plan struct {
	kubeServices bool
	registration bool
	authn        []string
	authz        string
}

func (f *flags) plan(cfg server.Config, haveKube bool) (plan, error) {
	var p plan
	var errs []error
	switch f.services {
	case "kube":
		p.kubeServices, p.registration = true, f.registration
		if f.postgresDSN != "" {
			errs = append(errs, cli.Usagef("-postgres-dsn is for -services postgres"))
		}
	case "postgres":
		if f.postgresDSN == "" {
			errs = append(errs, cli.Usagef("-services postgres needs -postgres-dsn"))
		}
	case "none":
		if f.postgresDSN != "" {
			errs = append(errs, cli.Usagef("-postgres-dsn is for -services postgres"))
		}
	}
	if (f.signerCert == "") != (f.signerKey == "") {
		errs = append(errs, cli.Usagef("-signer-ca-cert and -signer-ca-key go together"))
	}
	if f.signerCert != "" && !p.registration {
		errs = append(errs, cli.Usagef("-signer-ca-cert signs registration's CSRs: it needs -services kube with -registration"))
	}
	p.authn = split(f.authn)
	if len(p.authn) == 0 {
		if cfg.TLS.ClientCAFile != "" {
			p.authn = append(p.authn, "cert")
		}
		if haveKube {
			p.authn = append(p.authn, "tokenreview")
		}
		if len(p.authn) == 0 {
			errs = append(errs, cli.Usagef("no way to authenticate callers: set tls.clientCAFile in the config, give a kube-apiserver for token reviews (-kubeconfig), or say -authn=none to trust every caller"))
		}
	}
	for _, a := range p.authn {
		switch a {
		case "cert":
			if cfg.TLS.ClientCAFile == "" {
				errs = append(errs, cli.Usagef("-authn cert needs tls.clientCAFile in the config"))
			}
		case "tokenreview":
			if !haveKube {
				errs = append(errs, cli.Usagef("-authn tokenreview needs a kube-apiserver: -kubeconfig"))
			}
		case "none":
			if len(p.authn) > 1 {
				errs = append(errs, cli.Usagef("-authn none goes alone"))
			}
		default:
			errs = append(errs, cli.Usagef("-authn %q: want cert, tokenreview or none", a))
		}
	}
	p.authz = f.authz
	if p.authz == "" {
		p.authz = "rbac"
		if p.registration {
			p.authz = "registration"
		}
	}
	switch p.authz {
	case "rbac", "registration":
		if !haveKube {
			errs = append(errs, cli.Usagef("-authz %s asks a kube-apiserver: give -kubeconfig, or say -authz=none", p.authz))
		}
	case "none":
	default:
		errs = append(errs, cli.Usagef("-authz %q: want rbac, registration or none", p.authz))
	}
	if len(errs) > 0 {
		return p, cli.UsageError{Err: errors.Join(errs...)}
	}
	return p, nil
}

// kubeConfig is the kube-apiserver's client config the flags name, or
// nil when there is none to use (-services postgres without -kubeconfig).
func (f *flags) kubeConfig() (*rest.Config, error) {
	path := f.kubeconfig
	if path == "" {
		path = os.Getenv("KUBECONFIG")
	}
	var cfg *rest.Config
	var err error
	switch {
	case path != "":
		if cfg, err = clientcmd.BuildConfigFromFlags("", path); err != nil {
			return nil, cli.Usagef("kubeconfig %s: %v", path, err)
		}
	case f.services != "kube":
		return nil, nil
	default:
		if cfg, err = rest.InClusterConfig(); err != nil {
			return nil, cli.Usagef("no kubeconfig (-kubeconfig, $KUBECONFIG) and not in a cluster: %v", err)
		}
	}
	cfg.QPS, cfg.Burst = float32(f.kubeQPS), f.kubeBurst
	cfg.UserAgent = "workwire-broker"
	return cfg, nil
}

func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
