// Package layering checks that imports point down the package graph of
// ARCHITECTURE.md: a transport never knows about ManifestWork, and the
// generic clients never know a broker's name.
package layering

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const module = "github.com/workwire/sdk-go"

var brokers = []string{
	"github.com/eclipse/paho.golang",
	"github.com/cloudevents/sdk-go/protocol/",
	"github.com/mochi-mqtt/",
	"github.com/IBM/sarama",
	"github.com/twmb/franz-go",
	"google.golang.org/grpc",
}

var manifestWork = []string{
	"open-cluster-management.io/api",
	module + "/codec",
	module + "/work",
}

func TestImportsPointDown(t *testing.T) {
	tests := []struct {
		pkg       string
		forbidden []string
		allowed   []string // exceptions to forbidden
	}{
		{module + "/generic/...", append(append([]string{module + "/options/"}, brokers...), manifestWork...), nil},
		// The contract package uses one internal package: a leaf that
		// reads TLS files.
		{module + "/options", append(append([]string{module + "/generic", module + "/internal"}, brokers...), manifestWork...),
			[]string{module + "/internal/tlsfiles"}},
		{module + "/options/...", manifestWork, nil},
		{module + "/codec/...", append([]string{module + "/options/"}, brokers...), nil},
		// The drop-in clientset takes a transport's config as an
		// options.TransportConfig: a program links only the transports it
		// configures.
		{module + "/work", append([]string{module + "/options/"}, brokers...), nil},
		// Like work, the typed clients of other resources link only the
		// transports a program configures.
		{module + "/resource", append([]string{module + "/options/", module + "/work"}, brokers...), nil},
		// The engine is generic over the type: it knows no transport and
		// no drop-in clientset built on it.
		{module + "/internal/engine", append([]string{module + "/options/", module + "/work"}, brokers...), nil},
		// A service's database of works knows no transport; the contract
		// links no database driver.
		{module + "/work/workstore", append([]string{module + "/options/", "github.com/jackc/pgx"}, brokers...), nil},
		{module + "/work/pgstore", append([]string{module + "/options/"}, brokers...), nil},
		// What a hub waits for is reported in types of the standard
		// library's: every layer that waits may import it.
		{module + "/pending", []string{module + "/generic", module + "/options", module + "/internal", module + "/codec", module + "/work", "k8s.io/"}, nil},
		// Registration's hub side serves the gRPC broker: it links
		// neither another transport nor ManifestWork's clientset.
		{module + "/registration/...", []string{module + "/work", module + "/options/mqtt", module + "/options/kafka",
			"github.com/eclipse/paho.golang", "github.com/IBM/sarama", "github.com/twmb/franz-go"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.pkg, func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", tt.pkg).CombinedOutput()
			if err != nil {
				t.Fatalf("go list: %v\n%s", err, out)
			}
			for _, dep := range strings.Fields(string(out)) {
				if slices.Contains(tt.allowed, dep) {
					continue
				}
				for _, f := range tt.forbidden {
					if strings.HasPrefix(dep, f) {
						t.Errorf("%s depends on %s", tt.pkg, dep)
					}
				}
			}
		})
	}
}

// A program that builds a hub holder over MQTT links neither another
// transport nor the gRPC broker.
func TestAnMQTTHubLinksNoOtherTransport(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "./testdata/mqtthub").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, module+"/options/mqtt") {
		t.Fatalf("the program does not link options/mqtt: the test lists the wrong program\n%s", out)
	}
	for _, dep := range deps {
		for _, f := range []string{"github.com/IBM/sarama", "github.com/twmb/franz-go", "google.golang.org/grpc", module + "/options/kafka", module + "/options/grpc"} {
			if strings.HasPrefix(dep, f) {
				t.Errorf("a hub over MQTT links %s", dep)
			}
		}
	}
}

// The main module never depends on OCM's sdk-go: only the nested test
// module internal/tests/interop runs its peers.
func TestTheModuleDoesNotDependOnOCMsSDK(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-test", "-f", "{{.ImportPath}}", module+"/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "open-cluster-management.io/sdk-go") {
			t.Errorf("the module depends on %s", dep)
		}
	}
}

// Tracing uses OpenTelemetry's API and the caller's TracerProvider: no
// package of the module links the SDK or an exporter (tests may).
func TestTheModuleLinksNoOpenTelemetrySDK(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", module+"/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "go.opentelemetry.io/otel/sdk") || strings.HasPrefix(dep, "go.opentelemetry.io/otel/exporters") {
			t.Errorf("the module links %s", dep)
		}
	}
}

// Of the CloudEvents SDK's core module the module imports the event type
// alone (v2/event), tests too: its root package links the SDK's HTTP
// client and protocol into every program. The MQTT and Kafka protocol
// bindings the transports use need no more of it than that either.
func TestTheModuleLinksNoCloudEventsClient(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-test", "-f", "{{.ImportPath}}", module+"/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == "github.com/cloudevents/sdk-go/v2" || strings.HasPrefix(dep, "github.com/cloudevents/sdk-go/v2/client") ||
			strings.HasPrefix(dep, "github.com/cloudevents/sdk-go/v2/protocol/http") {
			t.Errorf("the module links %s", dep)
		}
	}
}

// internal/ shows what is what: its top-level packages are the library's
// own machinery; internal/testsupport holds harnesses for tests (and the
// examples' stand-ins), internal/tests suites that only test, and
// internal/tools the pinned programs tests run. No library package links
// test support or a suite.
func TestTheLibraryLinksNoTestSupport(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}: {{join .Deps \" \"}}", module+"/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, deps, _ := strings.Cut(line, ": ")
		if strings.HasPrefix(pkg, module+"/examples/") || strings.HasPrefix(pkg, module+"/internal/test") {
			continue
		}
		for _, dep := range strings.Fields(deps) {
			if strings.HasPrefix(dep, module+"/internal/testsupport/") || strings.HasPrefix(dep, module+"/internal/tests/") {
				t.Errorf("%s links %s", pkg, dep)
			}
		}
	}
}
