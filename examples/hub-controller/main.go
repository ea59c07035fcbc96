// Command hub-controller is a hub controller that places ManifestWorks on
// managed clusters and follows their status feedback back. Its controller
// (package hub) is ordinary client-go code: informer, lister, workqueue.
// This file is flags and wiring, and holds the one line that decides
// whether that code talks to a kube-apiserver or to work agents over MQTT.
//
// With the work agent of examples/work-agent, from two terminals:
//
//	go run ./examples/hub-controller -embedded-broker -clusters cluster1 -lifecycle
//	go run ./examples/work-agent -broker <the address the hub printed> -cluster cluster1
//
// With -lifecycle the hub creates -works works per cluster, waits until each
// is Available with its status feedback, updates them to two replicas,
// waits for the new generation's feedback, deletes them, waits until the
// agents confirmed, prints a summary with timings and exits 0 (1 on
// -timeout). Without it, it keeps the works in place until interrupted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/workwire/sdk-go/examples/hub-controller/hub"
	"github.com/workwire/sdk-go/examples/internal/cmdutil"
	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/options/mqtt/mqtttest"
	"github.com/workwire/sdk-go/work"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout)
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "hub-controller:", err)
		os.Exit(1)
	}
}

// run parses args and runs the hub controller.
func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("hub-controller", flag.ContinueOnError)
	broker := fs.String("broker", "", "MQTT broker host:port to reach the agents through")
	brokerConfig := fs.String("broker-config", "", "MQTT config file, YAML or JSON (options/mqtt.Config: TLS, credentials, topic layout); -broker overrides its brokerHost")
	embeddedBroker := fs.Bool("embedded-broker", false, "start an MQTT broker in this process and print its address for the agents")
	kubeconfig := fs.String("kubeconfig", "", "talk to this kube-apiserver instead of a broker: the same controller over the ordinary clientset")
	sourceID := fs.String("source-id", "hub-controller", "this hub's source ID on the broker")
	clusters := fs.String("clusters", "cluster1", "comma-separated names of the managed clusters")
	works := fs.Int("works", 3, "works per cluster")
	lifecycle := fs.Bool("lifecycle", false, "create, update and delete the works, wait for each step's status, print a summary and exit")
	timeout := fs.Duration("timeout", 2*time.Minute, "give the -lifecycle up after this long")
	workers := fs.Int("workers", hub.DefaultWorkers, "how many works to reconcile at once")
	healthAddr := fs.String("health-addr", "", "serve a readiness probe at http://<this address>/readyz (the holder's Healthy)")
	cmdutil.Verbosity(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	clusterNames := strings.Split(*clusters, ",")
	for i := range clusterNames {
		clusterNames[i] = strings.TrimSpace(clusterNames[i])
	}

	var builder *work.ClientHolderBuilder
	if *kubeconfig != "" {
		restConfig, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
		if err != nil {
			return err
		}
		builder = work.NewClientHolderBuilder(restConfig) // a kube-apiserver
	} else {
		mqttConfig, err := loadBrokerConfig(*brokerConfig, *broker)
		if err != nil {
			return err
		}
		if *embeddedBroker {
			b, err := mqtttest.Start()
			if err != nil {
				return err
			}
			defer b.Close()
			mqttConfig.BrokerHost = b.Addr()
			msg := fmt.Sprintf("embedded MQTT broker on %s\n", b.Addr())
			for _, cluster := range clusterNames {
				msg += fmt.Sprintf("  start an agent: go run ./examples/work-agent -broker %s -cluster %s\n", b.Addr(), cluster)
			}
			fmt.Fprint(out, msg)
		}
		if mqttConfig.BrokerHost == "" {
			return errors.New("no broker: give -broker host:port, -broker-config, -embedded-broker or -kubeconfig")
		}
		builder = work.NewClientHolderBuilder(&mqttConfig).WithSourceID(*sourceID) // events over MQTT
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

	return hub.Run(ctx, hub.Config{
		Holder:    holder,
		Clusters:  clusterNames,
		Works:     *works,
		Lifecycle: *lifecycle,
		Timeout:   *timeout,
		Workers:   *workers,
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
	return cfg, nil
}
