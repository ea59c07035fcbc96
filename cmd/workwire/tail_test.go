package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/internal/testsupport/proctest"
	"github.com/workwire/sdk-go/options/kafka/kafkatest"
	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/options/mqtt/mqtttest"
	"github.com/workwire/sdk-go/options/nats/natstest"
	"github.com/workwire/sdk-go/options/pubsub"
	"github.com/workwire/sdk-go/options/pubsub/pubsubtest"
	"github.com/workwire/sdk-go/options/transporttest"
	"github.com/workwire/sdk-go/work"
)

// `workwire tail` over each transport shows the events of a quickstart run
// as they pass, and takes none of them: the quickstart exits 0 only once
// every spec reached its agent and every status came back to its hub.
func TestTailShowsAQuickstartRun(t *testing.T) {
	quickstart := quickstartProgram(t)
	for _, tc := range []struct {
		transport string
		// start starts a broker for run id and returns its address, the
		// lines of tail's config file and tail's other arguments.
		start func(t *testing.T, id string) (addr string, file []string, args []string)
	}{
		{"mqtt", func(t *testing.T, _ string) (string, []string, []string) {
			addr := mqtttest.NewBroker(t).Addr()
			return addr, []string{"brokerHost: " + addr}, nil
		}},
		{"kafka", func(t *testing.T, _ string) (string, []string, []string) {
			addrs := kafkatest.NewBroker(t).Addrs()
			return strings.Join(addrs, ","), []string{"brokers: [" + strings.Join(addrs, ", ") + "]"}, nil
		}},
		{"nats", func(t *testing.T, id string) (string, []string, []string) {
			url := natstest.NewServer(t).URL()
			// The quickstart's stream and subjects on a server it is given.
			return url, []string{"url: " + url, "stream: WORKWIRE_" + strings.ToUpper(id), "subjectPrefix: workwire." + id}, nil
		}},
		{"pubsub", func(t *testing.T, id string) (string, []string, []string) {
			s := pubsubtest.NewServer(t)
			// Tail copies the topics, so they must exist before it starts;
			// the quickstart makes them in a project of the run's.
			project := "workwire-" + id
			makeTopics(t, pubsub.Config{ProjectID: project, Endpoint: s.Addr(), DisableTLS: true, Provision: true})
			return s.Addr(), []string{"projectID: " + project, "endpoint: " + s.Addr(), "disableTLS: true"}, nil
		}},
		{"grpc", func(t *testing.T, id string) (string, []string, []string) {
			b := startBroker(t, "broker", "-services", "none", "-authn", "none", "-authz", "none")
			return b.addr, []string{"serverAddress: " + b.addr}, []string{"-source", "quickstart-hub-" + id, "-cluster", "cluster-" + id + "-1"}
		}},
	} {
		t.Run(tc.transport, func(t *testing.T) {
			id := "tail-" + tc.transport
			addr, lines, args := tc.start(t, id)
			tail := proctest.Start(t, "tail", bin, nil, append([]string{"tail", "-transport", tc.transport, "-config", file(t, "client.yaml", lines...)}, args...)...)
			eventually(t, "tail connected", time.Minute, func() bool {
				if err := tail.Exited(); err != nil {
					t.Fatal(err)
				}
				return strings.Contains(tail.Output(), "msg=tailing")
			})

			// 21 works: 11 updated, 7 deleted (see the quickstart).
			run := proctest.Start(t, "quickstart", quickstart, nil, "-transport", tc.transport, "-broker", addr, "-id", id,
				"-clusters", "1", "-works", "21", "-timeout", "2m")
			if st := run.Wait(3 * time.Minute); st == nil || st.ExitCode() != 0 {
				t.Fatalf("the quickstart with tail beside it: %v:\n%s", st, run.Tail(20))
			}
			cluster := "cluster-" + id + "-1"
			count := func(eventType string) int {
				n := 0
				for _, l := range strings.Split(tail.Output(), "\n") {
					if strings.Contains(l, eventType+" cluster="+cluster+" resource=") {
						n++
					}
				}
				return n
			}
			eventually(t, "tail shows every spec and status of the run", time.Minute, func() bool {
				return count(".spec.create_request") >= 21 && count(".spec.update_request") >= 11 &&
					count(".spec.delete_request") >= 7 && count(".status.update_request") >= 21
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

var quickstartBuild struct {
	once      sync.Once
	bin, logs string
	err       error
}

// quickstartProgram builds examples/brokers/quickstart, the quickstart over
// every transport, once for the test run.
func quickstartProgram(t *testing.T) string {
	t.Helper()
	b := &quickstartBuild
	b.once.Do(func() {
		b.bin = filepath.Join(filepath.Dir(bin), "quickstart")
		out, err := exec.Command("go", "-C", "../../examples/brokers", "build", "-o", b.bin, "./quickstart").CombinedOutput()
		b.logs, b.err = string(out), err
	})
	if b.err != nil {
		t.Fatalf("build the quickstart: %v\n%s", b.err, b.logs)
	}
	return b.bin
}

// makeTopics makes the Pub/Sub topics of cfg's project.
func makeTopics(t *testing.T, cfg pubsub.Config) {
	t.Helper()
	tr, err := pubsub.New(cfg, pubsub.WithLogger(logr.Discard()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = tr.Start(ctx, nil, transporttest.NewRecorder())
	if closeErr := tr.Close(ctx); err == nil {
		err = closeErr
	}
	if err != nil {
		t.Fatal(err)
	}
}

// Over MQTT, a hub's replicas share its statuses in a $share group; tail,
// given the hub's own config file, which names the group, takes none: the
// hub, which sends no spec again and does not resync, gets every status.
func TestTailTakesNoShareOfAHubsStatuses(t *testing.T) {
	addr := mqtttest.NewBroker(t).Addr()
	client := &mqtt.Config{BrokerHost: addr, SharedGroup: "hubs"}
	tail := proctest.Start(t, "tail", bin, nil, "tail", "-transport", "mqtt", "-source", "hub",
		"-config", file(t, "hub.yaml", "brokerHost: "+addr, "sharedGroup: hubs"))
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
	eventually(t, "tail shows every status", time.Minute, func() bool {
		return strings.Count(tail.Output(), ".status.update_request cluster=cluster1 resource=") >= works
	})
}
