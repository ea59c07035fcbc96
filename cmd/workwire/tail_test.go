package main

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/internal/testsupport/proctest"
	"github.com/workwire/sdk-go/options/kafka"
	"github.com/workwire/sdk-go/options/kafka/kafkatest"
	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/options/mqtt/mqtttest"
	"github.com/workwire/sdk-go/options/nats"
	"github.com/workwire/sdk-go/options/nats/natstest"
	"github.com/workwire/sdk-go/work"
)

// `workwire tail` over each transport shows a hub's specs and its agent's
// statuses as they pass, and takes none of them: the hub, which sends no
// spec again and does not resync, gets every status — over MQTT it shares
// its statuses in a $share group that tail's config file names too.
func TestTailShowsEveryEventAndTakesNone(t *testing.T) {
	for _, tc := range []struct {
		transport string
		start     func(t *testing.T) (client any, file []string, args []string)
	}{
		{"mqtt", func(t *testing.T) (any, []string, []string) {
			addr := mqtttest.NewBroker(t).Addr()
			return &mqtt.Config{BrokerHost: addr, SharedGroup: "hubs"}, []string{"brokerHost: " + addr, "sharedGroup: hubs"}, []string{"-source", "hub"}
		}},
		{"kafka", func(t *testing.T) (any, []string, []string) {
			addrs := kafkatest.NewBroker(t).Addrs()
			return &kafka.Config{Brokers: addrs}, []string{"brokers: [" + strings.Join(addrs, ", ") + "]"}, nil
		}},
		{"nats", func(t *testing.T) (any, []string, []string) {
			url := natstest.NewServer(t).URL()
			return &nats.Config{URL: url}, []string{"url: " + url}, nil
		}},
		{"grpc", func(t *testing.T) (any, []string, []string) {
			b := startBroker(t, "broker", "-services", "none", "-authn", "none", "-authz", "none")
			return grpcConfig(b.addr), []string{"serverAddress: " + b.addr}, []string{"-source", "hub", "-cluster", "cluster1"}
		}},
	} {
		t.Run(tc.transport, func(t *testing.T) {
			client, lines, args := tc.start(t)
			tail := proctest.Start(t, "tail", bin, nil, append([]string{"tail", "-transport", tc.transport, "-config", file(t, "client.yaml", lines...)}, args...)...)
			eventually(t, "tail connected", time.Minute, func() bool {
				if err := tail.Exited(); err != nil {
					t.Fatal(err)
				}
				return strings.Contains(tail.Output(), "msg=tailing")
			})

			hub, err := work.NewClientHolderBuilder(client).WithSourceID("hub").WithLogger(discard).
				WithSourceOptions(generic.WithSpecResend(0), generic.WithResyncInterval(0)).NewClientHolder()
			if err != nil {
				t.Fatal(err)
			}
			startHolder(t, hub)
			startAgentOver(t, client, "cluster1", true)
			const works = 5
			ctx := context.Background()
			for i := range works {
				if _, err := hub.WorkInterface().WorkV1().ManifestWorks("cluster1").Create(ctx, newWork("cluster1", fmt.Sprintf("w%d", i)), metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			eventually(t, "every status at the hub", time.Minute, func() bool {
				l, err := hub.ManifestWorkInformer().Lister().ManifestWorks("cluster1").List(labels.Everything())
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for _, w := range l {
					if appliedAt(w, 1) {
						n++
					}
				}
				return n == works
			})
			count := func(eventType string) int {
				n := 0
				for _, l := range strings.Split(tail.Output(), "\n") {
					if strings.Contains(l, eventType+" cluster=cluster1 resource=") {
						n++
					}
				}
				return n
			}
			eventually(t, "tail shows every spec and status", time.Minute, func() bool {
				return count(".spec.create_request") >= works && count(".status.update_request") >= works
			})
			if err := tail.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if st := tail.Wait(time.Minute); st == nil || st.ExitCode() != 0 {
				t.Errorf("tail after SIGTERM: %v:\n%s", st, tail.Tail(20))
			}
		})
	}
}
