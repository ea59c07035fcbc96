// Command work-agent is a work agent for one managed cluster: it receives
// ManifestWorks from sources through an MQTT broker, applies their
// manifests to the cluster, and reports their status and status feedback
// back. The controller is in package agent; this file is flags and wiring.
//
// With the hub controller of examples/hub-controller, from two terminals:
//
//	go run ./examples/hub-controller -embedded-broker -clusters cluster1 -lifecycle
//	go run ./examples/work-agent -broker <the address the hub printed> -cluster cluster1
//
// Without -kubeconfig the agent applies to an in-memory cluster whose
// Deployments roll out at once; with -kubeconfig it applies to that cluster,
// and keeps what it holds in Secrets there (-state-namespace), so that it
// cleans up after a restart the works deleted while it was down; -state-dir
// keeps it in files instead.
// With -hub-kubeconfig instead of -broker, the works come from a hub's
// kube-apiserver rather than from events: the same controller code.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/workwire/sdk-go/examples/internal/cmdutil"
	"github.com/workwire/sdk-go/examples/work-agent/agent"
	"github.com/workwire/sdk-go/examples/work-agent/fakecluster"
	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/resource/agentstate"
	"github.com/workwire/sdk-go/work"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout)
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "work-agent:", err)
		os.Exit(1)
	}
}

// run parses args and runs the agent until ctx ends.
func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("work-agent", flag.ContinueOnError)
	broker := fs.String("broker", "", "MQTT broker host:port the works come through")
	brokerConfig := fs.String("broker-config", "", "MQTT config file, YAML or JSON (options/mqtt.Config: TLS, credentials, topic layout); -broker overrides its brokerHost")
	hubKubeconfig := fs.String("hub-kubeconfig", "", "take the works from this hub's kube-apiserver instead of a broker")
	cluster := fs.String("cluster", "cluster1", "this cluster's name")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the cluster to apply to (default: an in-memory cluster)")
	frequency := fs.Duration("status-update-frequency", agent.DefaultStatusUpdateFrequency, "how often to refresh status feedback")
	workers := fs.Int("workers", agent.DefaultWorkers, "how many works to reconcile at once")
	healthAddr := fs.String("health-addr", "", "serve a readiness probe at http://<this address>/readyz (the holder's Healthy)")
	stateNamespace := fs.String("state-namespace", "default", "with -kubeconfig: the namespace of the cluster's Secrets in which the agent keeps the works it holds")
	stateDir := fs.String("state-dir", "", "keep the works the agent holds in files in this directory instead")
	qps := fs.Float64("kube-api-qps", 50, "with -kubeconfig: the most requests a second to the cluster, as OCM's work agent's flag")
	burst := fs.Int("kube-api-burst", 100, "with -kubeconfig: the most requests at once to the cluster")
	cmdutil.Verbosity(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *cluster == "" {
		return errors.New("-cluster: no cluster name")
	}

	// The clientset the works come through.
	var builder *work.ClientHolderBuilder
	if *hubKubeconfig != "" {
		restConfig, err := clientcmd.BuildConfigFromFlags("", *hubKubeconfig)
		if err != nil {
			return err
		}
		builder = work.NewClientHolderBuilder(restConfig).WithClusterName(*cluster) // a hub kube-apiserver
	} else {
		mqttConfig, err := loadBrokerConfig(*brokerConfig, *broker)
		if err != nil {
			return err
		}
		builder = work.NewClientHolderBuilder(&mqttConfig).WithClusterName(*cluster) // events over MQTT
	}

	// The cluster the manifests go to, and what the agent keeps of them.
	client, mapper, secrets, err := clusterClients(*kubeconfig, float32(*qps), *burst)
	if err != nil {
		return err
	}
	state, err := agentState(*stateDir, secrets, *stateNamespace)
	if err != nil {
		return err
	}
	if state != nil {
		// Over a hub's kube-apiserver it has no effect: the hub keeps the
		// works.
		builder = builder.WithAgentState(state)
	}
	if *kubeconfig == "" {
		fmt.Fprintln(out, "applying to an in-memory cluster (use -kubeconfig for a real one)")
	}
	holder, err := builder.NewClientHolder()
	if err != nil {
		return err
	}
	stopProbe, err := cmdutil.ServeReadiness(*healthAddr, holder.Healthy, out)
	if err != nil {
		_ = holder.Close(context.Background())
		return err
	}
	defer stopProbe()
	return agent.Run(ctx, agent.Config{
		Holder:                holder,
		Cluster:               *cluster,
		Client:                client,
		Mapper:                mapper,
		StatusUpdateFrequency: *frequency,
		Workers:               *workers,
	}, out)
}

// loadBrokerConfig reads the MQTT config file if there is one, and sets the
// broker's address from -broker.
func loadBrokerConfig(path, broker string) (mqtt.Config, error) {
	var cfg mqtt.Config
	if path != "" {
		var err error
		if cfg, err = mqtt.LoadConfig(path); err != nil {
			return cfg, err
		}
	}
	if broker != "" {
		cfg.BrokerHost = broker
	}
	if cfg.BrokerHost == "" {
		return cfg, errors.New("no broker: give -broker host:port, -broker-config or -hub-kubeconfig")
	}
	return cfg, nil
}

// clusterClients returns a dynamic client, a RESTMapper and a client of
// the Secrets for the cluster in kubeconfig, sending at most qps requests a
// second (burst at once), or a dynamic client and a RESTMapper for an
// in-memory cluster if kubeconfig is empty.
func clusterClients(kubeconfig string, qps float32, burst int) (dynamic.Interface, meta.RESTMapper, kubernetes.Interface, error) {
	if kubeconfig == "" {
		c := fakecluster.New()
		return c.Client, c.Mapper, nil, nil
	}
	restConfig, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, nil, nil, err
	}
	restConfig.QPS, restConfig.Burst = qps, burst
	client, err := dynamic.NewForConfig(restConfig)
	if err != nil {
		return nil, nil, nil, err
	}
	kube, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return nil, nil, nil, err
	}
	// Discovery is cached, and reset when a kind is not found.
	return client, restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery())), kube, nil
}

// stateSecrets prefixes the Secrets in which the agent keeps its works.
const stateSecrets = "workwire-works"

// agentState is where the agent keeps the works it holds: files in dir,
// or else Secrets of the cluster in namespace; nil without either.
func agentState(dir string, cluster kubernetes.Interface, namespace string) (agentstate.Store, error) {
	switch {
	case dir != "":
		return agentstate.NewDir(dir)
	case cluster != nil:
		return agentstate.NewSecrets(cluster.CoreV1().Secrets(namespace), stateSecrets)
	}
	return nil, nil
}
