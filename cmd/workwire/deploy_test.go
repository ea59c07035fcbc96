package main

// The tests of deploy/ and the Containerfile: what an operator installs
// must agree with the program it runs. The dashboard's queries name only
// series the broker exports, with labels and values it sets; the manifests
// are objects a real kube-apiserver accepts, Pod Security's restricted
// level included, and the command line and config file they give the
// broker are ones it accepts; the Containerfile's build line builds the
// program, statically, as its last stage runs it.

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	workclient "open-cluster-management.io/api/client/work/clientset/versioned"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/yaml"

	"github.com/workwire/sdk-go/codec"
	"github.com/workwire/sdk-go/generic"
	"github.com/workwire/sdk-go/internal/testsupport/kubetest"
	"github.com/workwire/sdk-go/internal/testsupport/testcerts"
	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/grpc"
	"github.com/workwire/sdk-go/options/grpc/server"
	regkubeservice "github.com/workwire/sdk-go/registration/kubeservice"
	"github.com/workwire/sdk-go/work"
	workkubeservice "github.com/workwire/sdk-go/work/kubeservice"
)

const (
	dashboardFile = "deploy/grafana/workwire-broker.json"
	manifestsDir  = "deploy/kubernetes"
	containerfile = "Containerfile"
)

// The dashboard's queries name only series the broker exports, with the
// labels they group and filter by, and the label values they match: the
// broker runs with real traffic — a source and an agent exchanging a work,
// a connection that is not TLS refused by a broker that is — and its
// /metrics is what the queries are checked against. The series of specs
// waiting for a status exist only with a Service that acknowledges (a
// kube-apiserver's works): without a kube-apiserver those alone go
// unchecked, and the test says so and skips.
func TestTheDashboardsMetricsAreExported(t *testing.T) {
	queries := dashboardQueries(t)
	exported := exportedWithoutServices(t)
	overKube := false
	t.Run("over a kube-apiserver", func(t *testing.T) {
		exported.merge(exportedOverKube(t))
		overKube = true
	})

	// Only a Service that acknowledges its specs sets these.
	ackOnly := []string{
		"grpc_server_ce_specs_resent_total",
		"grpc_server_ce_first_status_latency_seconds_bucket",
		"grpc_server_ce_first_status_latency_seconds_sum",
		"grpc_server_ce_first_status_latency_seconds_count",
	}
	var unchecked []string
	for _, q := range queries {
		for _, problem := range q.check(exported) {
			if !overKube && slices.Contains(ackOnly, problem.metric) {
				unchecked = append(unchecked, problem.metric)
				continue
			}
			t.Errorf("%s: %s\n\t%s", q.where, problem.err, q.expr)
		}
	}
	if len(unchecked) > 0 {
		slices.Sort(unchecked)
		t.Skipf("without a kube-apiserver, no Service acknowledges specs: %v unchecked", slices.Compact(unchecked))
	}
}

// exportedWithoutServices is what `-services none` brokers export once
// a source and an agent exchanged a work through one of them and another
// agent's subscription ended, and a client that does not speak TLS was
// refused by another one, which serves TLS.
func exportedWithoutServices(t *testing.T) exportedSeries {
	b := startBroker(t, "dashboard", "-services", "none", "-authn", "none", "-authz", "none")
	startAgent(t, b.addr, "cluster1")
	hub := startSource(t, b.addr, "hub")
	works := hub.WorkInterface().WorkV1().ManifestWorks("cluster1")
	ctx := context.Background()
	created, err := works.Create(ctx, newWork("cluster1", "w1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the agent's status at the source", time.Minute, func() bool {
		w, err := works.Get(ctx, "w1", metav1.GetOptions{})
		return err == nil && appliedAt(w, created.Generation)
	})
	// A subscription that ends: grpc_server_handled_total counts
	// Subscribe streams only then.
	startSilentAgent(t, b.addr, "cluster2").close(t)
	var exported exportedSeries
	eventually(t, "the ended subscription counted", time.Minute, func() bool {
		exported = b.scrape(t)
		return exported["grpc_server_handled_total"]["grpc_method"]["Subscribe"]
	})

	ca := testcerts.NewCA(t)
	pair := ca.Server(t, "broker")
	// startBroker's -config comes first: this one, given later, wins.
	cfg := file(t, "tls-broker.yaml", "listenAddress: 127.0.0.1:0",
		"tls:", "  certFile: "+pair.CertFile, "  keyFile: "+pair.KeyFile, "  clientCAFile: "+ca.CAFile())
	tb := startBroker(t, "tls-broker", "-services", "none", "-authn", "none", "-authz", "none", "-config", cfg)
	notTLS(t, tb.addr)
	eventually(t, "a TLS handshake failure counted", time.Minute, func() bool {
		return tb.scrape(t)["grpc_server_tls_handshake_failures_total"] != nil
	})
	exported.merge(tb.scrape(t))
	return exported
}

// exportedOverKube is what a `-services kube` broker exports once one
// agent acknowledged its work and another, which never says anything,
// had its work sent again.
func exportedOverKube(t *testing.T) exportedSeries {
	cfg := kubetest.Start(t)
	kubetest.InstallOCMCRDs(t, cfg)
	kubetest.CreateNamespaces(t, cfg, "cluster1", "cluster2")
	config := file(t, "kube-broker.yaml", "listenAddress: 127.0.0.1:0", "specResendAfter: 200ms")
	b := startBroker(t, "kube-broker", "-services", "kube", "-kubeconfig", kubetest.Kubeconfig(t, cfg),
		"-registration=false", "-authn", "none", "-authz", "none", "-config", config)
	startAgent(t, b.addr, "cluster1")
	silent := startSilentAgent(t, b.addr, "cluster2")
	works := workclient.NewForConfigOrDie(cfg).WorkV1()
	ctx := context.Background()
	for _, cluster := range []string{"cluster1", "cluster2"} {
		if _, err := works.ManifestWorks(cluster).Create(ctx, newWork(cluster, "w1"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var exported exportedSeries
	eventually(t, "cluster1's status acknowledged and cluster2's spec sent again", time.Minute, func() bool {
		exported = b.scrape(t)
		return exported["grpc_server_ce_first_status_latency_seconds_count"] != nil &&
			exported["grpc_server_ce_specs_resent_total"] != nil
	})
	if n := silent.delivered.Load(); n < 2 {
		t.Errorf("the silent agent got %d events; a spec sent again makes 2", n)
	}
	return exported
}

// startSource starts a source's work client holder connected to addr.
func startSource(t *testing.T, addr, sourceID string) *work.ClientHolder {
	t.Helper()
	h, err := work.NewClientHolderBuilder(grpcConfig(addr)).WithSourceID(sourceID).WithLogger(discard).NewClientHolder()
	if err != nil {
		t.Fatal(err)
	}
	startHolder(t, h)
	return h
}

// silentAgent subscribes as a cluster's agent for works and never
// publishes: no status acknowledges what it gets.
type silentAgent struct {
	tr        options.Transport
	delivered atomic.Int64
}

// close ends its subscription; the test's end does too.
func (a *silentAgent) close(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := a.tr.Close(ctx); err != nil {
		t.Errorf("close the silent agent: %v", err)
	}
}

func (a *silentAgent) Deliver(d *options.Delivery) { a.delivered.Add(1); d.Done() }
func (a *silentAgent) Malformed(error)             {}
func (a *silentAgent) Connected()                  {}

func startSilentAgent(t *testing.T, addr, cluster string) *silentAgent {
	t.Helper()
	cfg := &grpc.Config{ServerAddress: addr}
	tr, err := cfg.NewTransport()
	if err != nil {
		t.Fatal(err)
	}
	a := &silentAgent{tr: tr}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := tr.Start(ctx, options.AgentSubscriptions(cluster, []string{codec.ManifestBundlesDataType.String()}), a); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.close(t) }) // Close is idempotent
	return a
}

// notTLS connects to addr, says something that is not a TLS handshake,
// and waits for the server to hang up.
func notTLS(t *testing.T, addr string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := conn.Write([]byte("GET / HTTP/1.1\r\nHost: broker\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, conn)
}

// series is what a scrape showed of one series name: its labels and the
// values each took.
type series map[string]map[string]bool

func (s series) merge(o series) {
	for l, vs := range o {
		if s[l] == nil {
			s[l] = map[string]bool{}
		}
		maps.Copy(s[l], vs)
	}
}

// exportedSeries are the series names of a scrape, as queries name them:
// a histogram's _bucket (with le), _sum and _count, a summary's own name
// (with quantile), _sum and _count.
type exportedSeries map[string]series

func (e exportedSeries) merge(o exportedSeries) {
	for name, s := range o {
		if e[name] == nil {
			e[name] = series{}
		}
		e[name].merge(s)
	}
}

func (b *brokerProc) scrape(t *testing.T) exportedSeries {
	t.Helper()
	code, body := b.fetch(t, "/metrics")
	if code != 200 {
		t.Fatalf("%s /metrics: %d %s", b.Name(), code, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("%s /metrics: %v", b.Name(), err)
	}
	out := exportedSeries{}
	add := func(name string, m *dto.Metric, extra string) {
		s := out[name]
		if s == nil {
			s = series{}
			out[name] = s
		}
		labels := m.GetLabel()
		if extra != "" {
			labels = append(slices.Clip(labels), &dto.LabelPair{Name: &extra, Value: new(string)})
		}
		for _, l := range labels {
			if s[l.GetName()] == nil {
				s[l.GetName()] = map[string]bool{}
			}
			s[l.GetName()][l.GetValue()] = true
		}
	}
	for name, mf := range families {
		for _, m := range mf.GetMetric() {
			switch mf.GetType() {
			case dto.MetricType_HISTOGRAM:
				add(name+"_bucket", m, "le")
				add(name+"_sum", m, "")
				add(name+"_count", m, "")
			case dto.MetricType_SUMMARY:
				add(name, m, "quantile")
				add(name+"_sum", m, "")
				add(name+"_count", m, "")
			default:
				add(name, m, "")
			}
		}
	}
	return out
}

// targetLabels are the labels Prometheus adds to every series it scrapes:
// the broker does not export them.
var targetLabels = []string{"job", "instance"}

// promQuery is one query of the dashboard, parsed as far as checking it
// needs: its selectors, and the labels it groups by or matches on.
type promQuery struct {
	where, expr string
	selectors   []selector
	grouping    []string // by, without, on, ignoring, group_left/right
	labels      []string // a template's label_values label
}

type selector struct {
	name     string
	matchers []matcher
}

type matcher struct{ label, op, value string }

type problem struct {
	metric string
	err    string
}

// check returns what the query names that exported lacks.
func (q promQuery) check(exported exportedSeries) []problem {
	var out []problem
	for _, s := range q.selectors {
		got := exported[s.name]
		if got == nil {
			out = append(out, problem{s.name, fmt.Sprintf("the broker exports no series %s", s.name)})
			continue
		}
		for _, m := range s.matchers {
			if slices.Contains(targetLabels, m.label) {
				continue
			}
			values, ok := got[m.label]
			if !ok {
				out = append(out, problem{s.name, fmt.Sprintf("%s has no label %s", s.name, m.label)})
				continue
			}
			if m.op == "=" && !strings.Contains(m.value, "$") && !values[m.value] {
				out = append(out, problem{s.name, fmt.Sprintf("no series of %s has %s=%q (it has %v)", s.name, m.label, m.value, slices.Sorted(maps.Keys(values)))})
			}
		}
		for _, l := range append(slices.Clip(q.grouping), q.labels...) {
			if slices.Contains(targetLabels, l) {
				continue
			}
			if _, ok := got[l]; !ok {
				out = append(out, problem{s.name, fmt.Sprintf("%s has no label %s to group by", s.name, l)})
			}
		}
	}
	return out
}

// dashboardQueries are the dashboard's queries: every expr of every panel
// and target, rows' panels included, and its template variables' queries;
// it also checks that every panel and target asks the data source the
// $datasource variable names.
func dashboardQueries(t *testing.T) []promQuery {
	t.Helper()
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash map[string]any
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var queries []promQuery
	add := func(where, expr string, parse func(string) (promQuery, error)) {
		q, err := parse(expr)
		if err != nil {
			t.Errorf("%s: %v\n\t%s", where, err, expr)
			return
		}
		q.where, q.expr = where, expr
		queries = append(queries, q)
	}

	var walk func(where string, v any)
	walk = func(where string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if title, ok := v["title"].(string); ok {
				where += fmt.Sprintf(" %q", title)
			}
			if ds, ok := v["datasource"]; ok {
				if m, _ := ds.(map[string]any); m["uid"] != "${datasource}" {
					t.Errorf("%s: datasource %v, want the ${datasource} variable", where, ds)
				}
			}
			if expr, ok := v["expr"].(string); ok {
				add(where, expr, parsePromQL)
			}
			for _, k := range slices.Sorted(maps.Keys(v)) {
				if k != "templating" {
					walk(where, v[k])
				}
			}
		case []any:
			for i, e := range v {
				walk(fmt.Sprintf("%s[%d]", where, i), e)
			}
		}
	}
	walk("dashboard", dash["panels"])

	templating, _ := dash["templating"].(map[string]any)
	vars, _ := templating["list"].([]any)
	sawDatasource := false
	for _, v := range vars {
		v, _ := v.(map[string]any)
		where := fmt.Sprintf("variable %v", v["name"])
		switch v["type"] {
		case "datasource":
			sawDatasource = sawDatasource || v["name"] == "datasource" && v["query"] == "prometheus"
		case "query":
			if m, _ := v["datasource"].(map[string]any); m["uid"] != "${datasource}" {
				t.Errorf("%s: datasource %v, want the ${datasource} variable", where, v["datasource"])
			}
			query := v["query"]
			if m, ok := query.(map[string]any); ok {
				query = m["query"]
			}
			s, _ := query.(string)
			add(where, s, parseTemplateQuery)
		}
	}
	if !sawDatasource {
		t.Errorf("%s has no Prometheus data source variable named datasource", dashboardFile)
	}
	if len(queries) == 0 {
		t.Fatalf("%s has no queries", dashboardFile)
	}
	return queries
}

// parseTemplateQuery parses Grafana's label_values(metric, label) and
// label_values(label): the only template queries the dashboard uses.
func parseTemplateQuery(s string) (promQuery, error) {
	inner, ok := strings.CutPrefix(strings.TrimSpace(s), "label_values(")
	if !ok || !strings.HasSuffix(inner, ")") {
		return promQuery{}, errors.New("a template query that is not label_values(...): teach parseTemplateQuery it")
	}
	inner = strings.TrimSuffix(inner, ")")
	i := strings.LastIndexByte(inner, ',')
	if i < 0 {
		return promQuery{labels: []string{strings.TrimSpace(inner)}}, nil
	}
	q, err := parsePromQL(inner[:i])
	q.labels = []string{strings.TrimSpace(inner[i+1:])}
	return q, err
}

// promFunctions are PromQL's functions and aggregation operators: an
// identifier before "(" must be one of them.
var promFunctions = strings.Fields(`
	abs absent absent_over_time acos acosh asin asinh atan atanh avg avg_over_time bottomk ceil changes
	clamp clamp_max clamp_min cos cosh count count_over_time count_values day_of_month day_of_week
	day_of_year days_in_month deg delta deriv double_exponential_smoothing exp floor group
	histogram_avg histogram_count histogram_fraction histogram_quantile histogram_stddev
	histogram_stdvar histogram_sum holt_winters hour idelta increase info irate label_join
	label_replace last_over_time limit_ratio limitk ln log10 log2 mad_over_time max max_over_time
	min min_over_time minute month pi predict_linear present_over_time quantile quantile_over_time
	rad rate resets round scalar sgn sin sinh sort sort_by_label sort_by_label_desc sort_desc sqrt
	stddev stddev_over_time stdvar stdvar_over_time sum sum_over_time tan tanh time timestamp topk
	vector year start end`)

// promGrouping are the keywords followed by a list of labels.
var promGrouping = strings.Fields("by without on ignoring group_left group_right")

// promKeywords are the other identifiers that are no metric.
var promKeywords = strings.Fields("and or unless bool offset atan2 inf nan")

var promToken = regexp.MustCompile(`\s+|"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`" +
	`|\$\{[^}]*\}|\$[A-Za-z0-9_]+|[A-Za-z_:][A-Za-z0-9_:]*|[0-9.][0-9A-Za-z.+]*|=~|!~|!=|==|<=|>=|.`)

// parsePromQL finds the selectors of a PromQL expression (Grafana's
// variables in it, $__rate_interval and the like, left as they are) and
// the labels it groups and matches by. It is no parser of the language,
// only of what a dashboard's queries hold; what it does not know it
// refuses, so that a query it cannot read fails the test rather than
// passing it.
func parsePromQL(expr string) (promQuery, error) {
	var toks []string
	for _, tok := range promToken.FindAllString(expr, -1) {
		if strings.TrimSpace(tok) != "" {
			toks = append(toks, tok)
		}
	}
	isIdent := func(s string) bool {
		return s[0] == '_' || s[0] == ':' || 'a' <= s[0] && s[0] <= 'z' || 'A' <= s[0] && s[0] <= 'Z'
	}
	var q promQuery
	for i := 0; i < len(toks); i++ {
		tok := toks[i]
		next := ""
		if i+1 < len(toks) {
			next = toks[i+1]
		}
		switch {
		case tok == "[":
			// A range or subquery: durations and variables.
			for i < len(toks) && toks[i] != "]" {
				i++
			}
		case tok == "{":
			// A selector without a name before it: {__name__="..."}.
			ms, end, err := parseMatchers(toks, i)
			if err != nil {
				return q, err
			}
			i = end
			s := selector{matchers: ms}
			for _, m := range ms {
				if m.label == "__name__" && m.op == "=" {
					s.name = m.value
				}
			}
			if s.name == "" {
				return q, errors.New("a selector without a metric name")
			}
			q.selectors = append(q.selectors, s)
		case !isIdent(tok):
		case slices.Contains(promGrouping, tok):
			if next != "(" {
				continue // group_left without labels
			}
			for i += 2; i < len(toks) && toks[i] != ")"; i++ {
				if toks[i] != "," {
					q.grouping = append(q.grouping, toks[i])
				}
			}
		case slices.Contains(promKeywords, tok):
		case next == "(" || next == "by" || next == "without":
			// A function, or an aggregation with its grouping first.
			if !slices.Contains(promFunctions, tok) {
				return q, fmt.Errorf("%s %s is no PromQL function parsePromQL knows", tok, next)
			}
		default:
			s := selector{name: tok}
			if next == "{" {
				ms, end, err := parseMatchers(toks, i+1)
				if err != nil {
					return q, err
				}
				s.matchers, i = ms, end
			}
			q.selectors = append(q.selectors, s)
		}
	}
	if len(q.selectors) == 0 {
		return q, errors.New("no metric in the query")
	}
	return q, nil
}

// parseMatchers parses the label matchers from toks[start] ("{") to its
// "}", and returns them and the index of the "}".
func parseMatchers(toks []string, start int) ([]matcher, int, error) {
	var ms []matcher
	i := start + 1
	for ; i < len(toks) && toks[i] != "}"; i++ {
		if toks[i] == "," {
			continue
		}
		if i+2 >= len(toks) {
			break
		}
		label, op, value := toks[i], toks[i+1], toks[i+2]
		if !slices.Contains([]string{"=", "!=", "=~", "!~"}, op) || value == "" || !strings.ContainsRune("\"'`", rune(value[0])) {
			return nil, i, fmt.Errorf("label matcher %s %s %s", label, op, value)
		}
		if value[0] == '"' {
			v, err := strconv.Unquote(value)
			if err != nil {
				return nil, i, fmt.Errorf("label matcher %s%s%s: %v", label, op, value, err)
			}
			value = v
		} else {
			value = value[1 : len(value)-1]
		}
		ms = append(ms, matcher{label, op, value})
		i += 2
	}
	if i >= len(toks) {
		return nil, i, errors.New("a selector's { is not closed")
	}
	return ms, i, nil
}

// manifest is one object of deploy/kubernetes, and the file it is in.
type manifest struct {
	file string
	obj  *unstructured.Unstructured
}

func (m manifest) String() string {
	return fmt.Sprintf("%s: %s %s", m.file, m.obj.GetKind(), m.obj.GetName())
}

// kustomization is what deploy_test reads of kustomization.yaml.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
	Images     []struct {
		Name    string `json:"name"`
		NewName string `json:"newName"`
		NewTag  string `json:"newTag"`
		Digest  string `json:"digest"`
	} `json:"images"`
}

// manifests are the objects kustomization.yaml renders, as far as it
// uses kustomize: its resources, in its order, with its images set. It
// fails t if the kustomization uses anything else (sigs.k8s.io/kustomize
// is not in the module graph, and these manifests need no more), lists
// a file that is not in the directory or leaves one out, or sets an image
// tag that deployment.yaml, applied alone with -f, would not run.
func manifests(t *testing.T) []manifest {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(manifestsDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v (deploy_test renders resources and images alone: teach it more, or do without)", err)
	}
	files, err := filepath.Glob(filepath.Join(manifestsDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var inDir []string
	for _, f := range files {
		if name := filepath.Base(f); name != "kustomization.yaml" {
			inDir = append(inDir, name)
		}
	}
	if got, want := slices.Sorted(slices.Values(k.Resources)), inDir; !slices.Equal(got, want) {
		t.Errorf("kustomization.yaml's resources are %v; the directory's files %v", got, want)
	}
	for _, img := range k.Images {
		if img.NewTag == "" && img.Digest == "" || img.NewTag == "latest" {
			t.Errorf("kustomization.yaml: image %s has tag %q: name a release", img.Name, img.NewTag)
		}
	}

	var out []manifest
	for _, name := range k.Resources {
		f, err := os.Open(filepath.Join(manifestsDir, name))
		if err != nil {
			t.Fatal(err)
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(f))
		for {
			doc, err := r.Read()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(doc, &obj.Object); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if len(obj.Object) == 0 {
				continue // comments alone
			}
			out = append(out, manifest{file: name, obj: obj})
		}
		f.Close()
	}

	// The images: transformer, for the containers of pod templates.
	for _, m := range out {
		containers, found, _ := unstructured.NestedSlice(m.obj.Object, "spec", "template", "spec", "containers")
		if !found {
			continue
		}
		for i, c := range containers {
			c := c.(map[string]any)
			image, _ := c["image"].(string)
			name, tag, _ := strings.Cut(image, ":")
			for _, img := range k.Images {
				if img.Name != name {
					continue
				}
				if tag != img.NewTag {
					t.Errorf("%s: image %s; kustomization.yaml sets tag %s: keep them the same", m, image, img.NewTag)
				}
				if img.NewName != "" {
					name = img.NewName
				}
				image = name + ":" + img.NewTag
				if img.Digest != "" {
					image = name + "@" + img.Digest
				}
			}
			if _, tag, _ := strings.Cut(image, ":"); tag == "" || tag == "latest" {
				t.Errorf("%s: image %s: name a release", m, image)
			}
			c["image"] = image
			containers[i] = c
		}
		if err := unstructured.SetNestedSlice(m.obj.Object, containers, "spec", "template", "spec", "containers"); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// warnings collects the kube-apiserver's warnings (Pod Security's among
// them).
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	l := w.list
	w.list = nil
	return l
}

// applier applies manifests server-side to a kube-apiserver and fails
// the test with what the server says, its warnings included.
type applier struct {
	t      *testing.T
	client dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
	warned *warnings
}

func newApplier(t *testing.T, cfg *rest.Config) *applier {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	a := &applier{t: t, warned: &warnings{}}
	cfg.WarningHandler = a.warned
	var err error
	if a.client, err = dynamic.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	return a
}

// apply applies m, for real or with dryRun=All.
func (a *applier) apply(m manifest, dryRun bool) {
	t := a.t
	t.Helper()
	gvk := m.obj.GroupVersionKind()
	mapping, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		t.Errorf("%s: %v", m, err)
		return
	}
	var r dynamic.ResourceInterface = a.client.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if m.obj.GetNamespace() == "" {
			t.Errorf("%s: no namespace; `kubectl apply -f` would put it in the current context's", m)
			return
		}
		r = a.client.Resource(mapping.Resource).Namespace(m.obj.GetNamespace())
	} else if m.obj.GetNamespace() != "" {
		t.Errorf("%s: a namespace on a cluster-scoped object", m)
	}
	opts := metav1.ApplyOptions{FieldManager: "workwire-deploy-test", Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	if _, err := r.Apply(context.Background(), m.obj.GetName(), m.obj, opts); err != nil {
		t.Errorf("%s: server-side apply (dry-run %v): %v", m, dryRun, err)
	}
	for _, w := range a.warned.take() {
		t.Errorf("%s: the kube-apiserver warns: %s", m, w)
	}
}

// The manifests are what a real kube-apiserver accepts, with OCM's CRDs
// installed as on a hub: each object is applied server-side with dry-run
// (the Namespace for real first, which the others need), and neither
// fails nor draws a warning — the namespace warns of pods below Pod
// Security's restricted level, so the Deployment's pod template passes it.
func TestTheManifestsPassServerSideDryRun(t *testing.T) {
	objs := manifests(t)
	cfg := kubetest.Start(t)
	kubetest.InstallOCMCRDs(t, cfg)
	a := newApplier(t, cfg)
	var namespaces int
	for _, m := range objs {
		if m.obj.GetKind() == "Namespace" {
			a.apply(m, false)
			namespaces++
		}
	}
	if namespaces != 1 {
		t.Errorf("%d Namespaces in the manifests, want 1", namespaces)
	}
	kinds := map[string]int{}
	for _, m := range objs {
		kinds[m.obj.GetKind()]++
		if m.obj.GetKind() != "Namespace" {
			a.apply(m, true)
		}
	}
	for _, k := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "Deployment", "Service"} {
		if kinds[k] == 0 {
			t.Errorf("no %s in the manifests", k)
		}
	}
}

// The manifests' RBAC is enough for the broker they run: their Namespace,
// ServiceAccount, ClusterRoles and bindings applied to a hub, a broker run
// with the Deployment's flags and config file, as that ServiceAccount
// (impersonated), syncs every informer (it is ready), authenticates an
// agent's ServiceAccount token (TokenReview) and authorizes it
// (SubjectAccessReview), puts its finalizer on a work, writes the agent's
// status, lets the deleted work go, and its signer approves an agent's
// renewal (created as the broker) and signs it. The registration Services' writes (ManagedClusters,
// Leases, Events, add-ons' status, token requests) need OCM's agent to
// make them: only the dry run and rbac.yaml's comments vouch for those.
func TestTheManifestsRBACIsEnoughForTheBroker(t *testing.T) {
	d := theDeployment(t)
	cfg := kubetest.Start(t)
	kubetest.InstallOCMCRDs(t, cfg)
	kubetest.CreateNamespaces(t, cfg, "cluster1")
	a := newApplier(t, cfg)
	namespace := ""
	for _, kind := range []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding"} {
		for _, m := range d.byKind(kind) {
			a.apply(m, false)
			if kind == "ServiceAccount" && m.obj.GetName() == d.pod.ServiceAccountName {
				namespace = m.obj.GetNamespace()
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// The broker as the Deployment runs it, but for the addresses (the
	// gRPC port the OS's, startBroker's admin port), as its ServiceAccount.
	config, flags, _, ca := d.local(t)
	config = regexp.MustCompile(`(?m)^listenAddress:.*$`).ReplaceAllString(config, "listenAddress: 127.0.0.1:0")
	var args []string
	for _, arg := range d.c.Args[1:] {
		name, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		if name != "config" && name != "admin-address" {
			args = append(args, "-"+name+"="+flags[name])
		}
	}
	args = append(args, "-config", file(t, "broker.yaml", config), "-kubeconfig", impersonating(t, cfg, namespace, d.pod.ServiceAccountName))
	b := startBroker(t, "deployed-broker", args...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the broker's log (a forbidden call names the rule it lacks):\n%s", b.Tail(40))
		}
	})

	// An agent's ServiceAccount, allowed its cluster's works as OCM's hub
	// asks (kubeauth.ResourceAttributes).
	kube := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	if _, err := kube.CoreV1().ServiceAccounts("cluster1").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "agent"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dt := codec.ManifestBundlesDataType
	if _, err := kube.RbacV1().Roles("cluster1").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "agent"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{dt.Group}, Resources: []string{dt.Resource, dt.Resource + "/status"}, Verbs: []string{"watch", "list", "update"},
	}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().RoleBindings("cluster1").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "agent"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "agent", Namespace: "cluster1"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token, err := kube.CoreV1().ServiceAccounts("cluster1").CreateToken(ctx, "agent", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	agentCfg := &grpc.Config{ServerAddress: b.addr, TLS: options.TLSConfig{CAFile: ca.CAFile()}, Token: token.Status.Token,
		ReconnectMaxBackoff: options.Duration(500 * time.Millisecond)}
	agent, err := work.NewClientHolderBuilder(agentCfg).WithClusterName("cluster1").WithLogger(logr.Discard()).
		WithAgentOptions(generic.WithResyncInterval(0)).NewClientHolder()
	if err != nil {
		t.Fatal(err)
	}
	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := agent.Start(startCtx); err != nil {
		t.Fatalf("the agent's start: %v\n%s", err, b.Tail(30))
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := agent.Close(ctx); err != nil {
			t.Errorf("close agent: %v", err)
		}
	})

	// A work: the finalizer, the agent's status, the deletion.
	works := workclient.NewForConfigOrDie(cfg).WorkV1().ManifestWorks("cluster1")
	created, err := works.Create(ctx, newWork("cluster1", "w1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the broker's finalizer on the work", time.Minute, func() bool {
		w, err := works.Get(ctx, "w1", metav1.GetOptions{})
		return err == nil && slices.Contains(w.Finalizers, workkubeservice.Finalizer)
	})
	var held *workv1.ManifestWork
	eventually(t, "the work at the agent", time.Minute, func() bool {
		held, err = agent.ManifestWorkInformer().Lister().ManifestWorks("cluster1").Get("w1")
		return err == nil
	})
	applied := held.DeepCopy()
	meta.SetStatusCondition(&applied.Status.Conditions, metav1.Condition{Type: workv1.WorkApplied, Status: metav1.ConditionTrue,
		Reason: "Applied", ObservedGeneration: held.Generation})
	if _, err := agent.WorkInterface().WorkV1().ManifestWorks("cluster1").UpdateStatus(ctx, applied, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the agent's status on the work", time.Minute, func() bool {
		w, err := works.Get(ctx, "w1", metav1.GetOptions{})
		return err == nil && appliedAt(w, created.Generation)
	})
	if err := works.Delete(ctx, "w1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deleted work gone", time.Minute, func() bool {
		_, err := works.Get(ctx, "w1", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})

	// A renewal of an agent's certificate, as the broker's CSR Service
	// creates it (as the broker's own identity, which is all the signer
	// trusts the annotation of): approved, then signed.
	cn := regkubeservice.AgentCommonNamePrefix + "cluster1:agent1"
	asBroker := rest.CopyConfig(cfg)
	asBroker.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + namespace + ":" + d.pod.ServiceAccountName}
	csrs := kube.CertificatesV1().CertificateSigningRequests()
	if _, err := kubernetes.NewForConfigOrDie(asBroker).CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster1-agent1",
			Labels:      map[string]string{regkubeservice.ClusterNameLabel: "cluster1"},
			Annotations: map[string]string{regkubeservice.CSRUserAnnotation: cn}},
		Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: regkubeservice.GRPCSigner,
			Request: testcerts.CertificateRequest(t, cn, regkubeservice.AgentCommonNamePrefix+"cluster1"),
			Usages:  []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the renewal approved and signed", time.Minute, func() bool {
		csr, err := csrs.Get(ctx, "cluster1-agent1", metav1.GetOptions{})
		return err == nil && len(csr.Status.Certificate) > 0
	})
	for _, l := range logLines(b.Output()) {
		if l["level"] == "error" || l["err"] != nil && strings.Contains(fmt.Sprint(l["err"]), "forbidden") {
			t.Errorf("the broker logged: %v", l)
		}
	}
}

// impersonating writes a kubeconfig of cfg's user (Start's, which may
// impersonate) acting as the ServiceAccount name of namespace ns, and
// returns its path.
func impersonating(t *testing.T, cfg *rest.Config, ns, name string) string {
	t.Helper()
	user := "system:serviceaccount:" + ns + ":" + name
	kc := clientcmdapi.NewConfig()
	kc.Clusters["hub"] = &clientcmdapi.Cluster{Server: cfg.Host, InsecureSkipTLSVerify: cfg.Insecure, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["broker"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken, Impersonate: user,
		ImpersonateGroups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	kc.Contexts["hub"] = &clientcmdapi.Context{Cluster: "hub", AuthInfo: "broker"}
	kc.CurrentContext = "hub"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// deployed is the broker as the manifests run it: the Deployment's pod
// and its one container, the container's flags, and the ConfigMaps.
type deployed struct {
	objs       []manifest
	replicas   int
	pod        podSpec
	c          containerSpec
	flags      map[string]string
	configMaps map[string]map[string]any
}

type podSpec struct {
	TerminationGracePeriodSeconds int             `json:"terminationGracePeriodSeconds"`
	ServiceAccountName            string          `json:"serviceAccountName"`
	Containers                    []containerSpec `json:"containers"`
	Volumes                       []struct {
		Name      string `json:"name"`
		ConfigMap *struct {
			Name string `json:"name"`
		} `json:"configMap"`
		Secret *struct {
			SecretName string `json:"secretName"`
		} `json:"secret"`
	} `json:"volumes"`
}

type containerSpec struct {
	Args  []string `json:"args"`
	Ports []struct {
		Name          string `json:"name"`
		ContainerPort int    `json:"containerPort"`
	} `json:"ports"`
	ReadinessProbe probeSpec `json:"readinessProbe"`
	LivenessProbe  probeSpec `json:"livenessProbe"`
	Lifecycle      struct {
		PreStop struct {
			Sleep struct {
				Seconds int `json:"seconds"`
			} `json:"sleep"`
		} `json:"preStop"`
	} `json:"lifecycle"`
	VolumeMounts []struct {
		Name      string `json:"name"`
		MountPath string `json:"mountPath"`
	} `json:"volumeMounts"`
}

type probeSpec struct {
	HTTPGet struct {
		Path string `json:"path"`
		Port string `json:"port"`
	} `json:"httpGet"`
}

// theDeployment reads the manifests' one Deployment of one container.
func theDeployment(t *testing.T) *deployed {
	t.Helper()
	d := &deployed{objs: manifests(t), flags: map[string]string{}, configMaps: map[string]map[string]any{}}
	deployments := d.byKind("Deployment")
	if len(deployments) != 1 {
		t.Fatalf("%d Deployments, want 1", len(deployments))
	}
	var spec struct {
		Spec struct {
			Replicas int `json:"replicas"`
			Template struct {
				Spec podSpec `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	convert(t, deployments[0].obj, &spec)
	d.replicas, d.pod = spec.Spec.Replicas, spec.Spec.Template.Spec
	if len(d.pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(d.pod.Containers))
	}
	d.c = d.pod.Containers[0]
	if len(d.c.Args) == 0 || d.c.Args[0] != "broker" {
		t.Fatalf("args %v: want `broker` first", d.c.Args)
	}
	for _, a := range d.c.Args[1:] {
		name, value, ok := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !ok || !strings.HasPrefix(a, "-") {
			t.Errorf("argument %q: want -flag=value, which says what it sets on its own", a)
		}
		d.flags[name] = value
	}
	for _, m := range d.byKind("ConfigMap") {
		data, _, _ := unstructured.NestedMap(m.obj.Object, "data")
		d.configMaps[m.obj.GetName()] = data
	}
	return d
}

func (d *deployed) byKind(kind string) []manifest {
	var out []manifest
	for _, m := range d.objs {
		if m.obj.GetKind() == kind {
			out = append(out, m)
		}
	}
	return out
}

// volumeOf returns the ConfigMap or Secret whose volume holds path, and
// its key; it fails t if none does.
func (d *deployed) volumeOf(t *testing.T, path string) (configMap, secret, key string) {
	t.Helper()
	for _, vm := range d.c.VolumeMounts {
		rel, ok := strings.CutPrefix(path, strings.TrimSuffix(vm.MountPath, "/")+"/")
		if !ok {
			continue
		}
		for _, v := range d.pod.Volumes {
			if v.Name != vm.Name {
				continue
			}
			if v.ConfigMap != nil {
				return v.ConfigMap.Name, "", rel
			}
			if v.Secret != nil {
				return "", v.Secret.SecretName, rel
			}
		}
	}
	t.Errorf("%s is under no volume of a ConfigMap or Secret", path)
	return "", "", ""
}

// config returns the config file the -config flag names, from its
// ConfigMap.
func (d *deployed) config(t *testing.T) string {
	t.Helper()
	cm, _, key := d.volumeOf(t, d.flags["config"])
	content, ok := d.configMaps[cm][key].(string)
	if !ok {
		t.Fatalf("-config %s: ConfigMap %q has no key %q", d.flags["config"], cm, key)
	}
	return content
}

// local is the broker's config file and flags with the Secrets' volumes
// moved to a directory of t's, root, which holds what a
// kubernetes.io/tls Secret does (tls.crt, tls.key, ca.crt): in the volume
// of -signer-ca-cert, ca's own certificate and key; in the others, a
// serving certificate for 127.0.0.1 that ca signs, ca's as ca.crt.
func (d *deployed) local(t *testing.T) (config string, flags map[string]string, root string, ca *testcerts.CA) {
	t.Helper()
	config, flags = d.config(t), maps.Clone(d.flags)
	root = t.TempDir()
	ca = testcerts.NewCA(t)
	pair := ca.Server(t, "broker")
	for _, vm := range d.c.VolumeMounts {
		if _, secret, _ := d.volumeOf(t, filepath.Join(vm.MountPath, "x")); secret == "" {
			continue
		}
		dir := filepath.Join(root, vm.MountPath)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		files := map[string][]byte{"tls.crt": pair.CertPEM, "tls.key": pair.KeyPEM, "ca.crt": ca.CertPEM}
		if strings.HasPrefix(d.flags["signer-ca-cert"], vm.MountPath+"/") {
			files = map[string][]byte{"tls.crt": ca.CertPEM, "tls.key": ca.KeyPEM(t), "ca.crt": ca.CertPEM}
		}
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		config = strings.ReplaceAll(config, " "+vm.MountPath+"/", " "+dir+"/")
		for k, v := range flags {
			if strings.HasPrefix(v, vm.MountPath+"/") {
				flags[k] = filepath.Join(root, v)
			}
		}
	}
	return config, flags, root, ca
}

// The Deployment runs the program as it accepts to be run: the broker's
// flags as its command line parses them, its config file from the
// ConfigMap as LoadConfig reads it, with its files and the flags' under
// the volumes mounted from their Secrets; its ports are the ones the
// config and the flags listen on, named by the probes and the Services;
// and the grace period outlasts the drain.
func TestTheDeploymentRunsTheProgramsOwnCommandLine(t *testing.T) {
	d := theDeployment(t)
	if d.replicas < 2 {
		t.Errorf("%d replicas: one is no service", d.replicas)
	}
	// The command line parses (-h last: every flag before it is parsed
	// first, and an unknown one or a bad value exits 2).
	if code, _, stderr := workwire(t, append(slices.Clip(d.c.Args), "-h")...); code != 0 {
		t.Errorf("workwire %s -h: exit %d:\n%s", strings.Join(d.c.Args, " "), code, stderr)
	}

	// Every file the broker reads lies under a volume of a Secret, and
	// the config file, which LoadConfig reads, in the ConfigMap's.
	content, flags, root, _ := d.local(t)
	cfg, err := server.LoadConfig(file(t, "broker.yaml", content))
	if err != nil {
		t.Fatalf("the config file %s: %v", d.flags["config"], err)
	}
	for _, path := range []string{cfg.TLS.CertFile, cfg.TLS.KeyFile, cfg.TLS.ClientCAFile, flags["signer-ca-cert"], flags["signer-ca-key"]} {
		if path = strings.TrimPrefix(path, root); path == "" {
			continue
		}
		if _, secret, _ := d.volumeOf(t, path); secret == "" {
			t.Errorf("%s is not in a Secret's volume", path)
		}
	}
	if !cfg.TLS.IsEnabled() || cfg.TLS.ClientCAFile == "" {
		t.Errorf("the config file serves without TLS or client certificates: %+v", cfg.TLS)
	}

	// The ports: gRPC from the config file, the admin port from the flag.
	ports := map[string]int{}
	for _, p := range d.c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	portOf := func(addr string) int {
		_, p, err := net.SplitHostPort(addr)
		if err != nil {
			t.Errorf("address %q: %v", addr, err)
		}
		n, _ := strconv.Atoi(p)
		return n
	}
	if got := portOf(cfg.ListenAddress); got != ports["grpc"] {
		t.Errorf("the config listens on %d; the container port grpc is %d", got, ports["grpc"])
	}
	if got := portOf(d.flags["admin-address"]); got != ports["admin"] {
		t.Errorf("-admin-address listens on %d; the container port admin is %d", got, ports["admin"])
	}
	if host, _, _ := net.SplitHostPort(d.flags["admin-address"]); host == "127.0.0.1" || host == "localhost" {
		t.Errorf("-admin-address %s: the kubelet's probes and Prometheus cannot reach loopback", d.flags["admin-address"])
	}
	for probe, want := range map[string]struct{ got, want string }{
		"readiness": {d.c.ReadinessProbe.HTTPGet.Path + " " + d.c.ReadinessProbe.HTTPGet.Port, "/readyz admin"},
		"liveness":  {d.c.LivenessProbe.HTTPGet.Path + " " + d.c.LivenessProbe.HTTPGet.Port, "/healthz admin"},
	} {
		if want.got != want.want {
			t.Errorf("%s probe %s, want %s", probe, want.got, want.want)
		}
	}
	for _, m := range d.byKind("Service") {
		svcPorts, _, _ := unstructured.NestedSlice(m.obj.Object, "spec", "ports")
		for _, p := range svcPorts {
			target, _ := p.(map[string]any)["targetPort"].(string)
			if _, ok := ports[target]; !ok {
				t.Errorf("%s: targetPort %v is no container port's name", m, p.(map[string]any)["targetPort"])
			}
		}
	}

	// The grace period outlasts the preStop pause and the drain.
	shutdown, err := time.ParseDuration(d.flags["shutdown-timeout"])
	if err != nil {
		t.Errorf("-shutdown-timeout: %v", err)
	}
	pause := time.Duration(d.c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	if grace := time.Duration(d.pod.TerminationGracePeriodSeconds) * time.Second; grace <= pause+shutdown {
		t.Errorf("terminationGracePeriodSeconds %v, not more than the preStop pause %v and -shutdown-timeout %v", grace, pause, shutdown)
	}
	var accounts []string
	for _, m := range d.byKind("ServiceAccount") {
		accounts = append(accounts, m.obj.GetName())
	}
	if !slices.Contains(accounts, d.pod.ServiceAccountName) {
		t.Errorf("serviceAccountName %q is none of the manifests' ServiceAccounts %v", d.pod.ServiceAccountName, accounts)
	}
}

func convert(t *testing.T, obj *unstructured.Unstructured, into any) {
	t.Helper()
	data, err := json.Marshal(obj.Object)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, into); err != nil {
		t.Fatalf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
	}
}

// instruction is one instruction of the Containerfile: its keyword, its
// flags (--from=build) and the rest of its line, continuations joined.
type instruction struct {
	line    int
	keyword string
	flags   []string
	args    string
}

func parseContainerfile(t *testing.T, data []byte) []instruction {
	t.Helper()
	var out []instruction
	var cur strings.Builder
	start := 0
	for i, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		if cont, ok := strings.CutSuffix(trimmed, `\`); ok {
			cur.WriteString(cont + " ")
			continue
		}
		cur.WriteString(trimmed)
		keyword, rest, _ := strings.Cut(cur.String(), " ")
		ins := instruction{line: start, keyword: strings.ToUpper(keyword)}
		fields := strings.Fields(rest)
		for len(fields) > 0 && strings.HasPrefix(fields[0], "--") {
			ins.flags = append(ins.flags, fields[0])
			fields = fields[1:]
		}
		ins.args = strings.Join(fields, " ")
		out = append(out, ins)
		cur.Reset()
	}
	return out
}

// The Containerfile's go build line builds the program: it is run as the
// file says it (its environment, its -C directory, its flags), from the
// repository root, which is the image's build context, with only the
// output moved to a directory of the test's. The binary it makes is
// static, as distroless/static needs, and runs; the stages agree with
// it — the builder's Go is cmd/workwire's go.mod's, the final stage
// copies that binary and runs it as nonroot — and every file the builder
// copies from the context exists.
func TestTheContainerfileBuildsTheProgram(t *testing.T) {
	data, err := os.ReadFile(containerfile)
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	goVersion := goDirective(t, "go.mod")
	goMinor := strings.Join(strings.SplitN(goVersion, ".", 3)[:2], ".")

	inss := parseContainerfile(t, data)
	var froms []instruction
	var build *instruction
	for i, ins := range inss {
		switch ins.keyword {
		case "FROM":
			froms = append(froms, ins)
		case "RUN":
			if strings.Contains(ins.args, "go ") && strings.Contains(ins.args, " build ") {
				if build != nil {
					t.Fatalf("line %d: a second go build line (line %d is one)", ins.line, build.line)
				}
				build = &inss[i]
			}
		case "COPY":
			if len(ins.flags) > 0 || len(froms) != 1 {
				continue
			}
			srcs := strings.Fields(ins.args)
			for _, src := range srcs[:len(srcs)-1] {
				if _, err := os.Stat(filepath.Join(root, src)); err != nil {
					t.Errorf("line %d: COPY %s: not in the repository root: %v", ins.line, src, err)
				}
			}
		}
	}
	if len(froms) != 2 {
		t.Fatalf("%d stages, want 2 (build, run)", len(froms))
	}
	builder := strings.Fields(froms[0].args)
	if len(builder) != 3 || !strings.EqualFold(builder[1], "AS") || !regexp.MustCompile(`(^|/)golang:`+regexp.QuoteMeta(goMinor)+`(\.|-|$)`).MatchString(builder[0]) {
		t.Errorf("line %d: FROM %s: want golang:%s (go.mod's go %s) AS <name>", froms[0].line, froms[0].args, goMinor, goVersion)
	}
	if froms[1].args != "gcr.io/distroless/static:nonroot" {
		t.Errorf("line %d: FROM %s: want gcr.io/distroless/static:nonroot", froms[1].line, froms[1].args)
	}
	if build == nil {
		t.Fatal("no RUN line builds with go build")
	}

	// The build line, as the shell would split it: no quoting is used.
	if strings.ContainsAny(build.args, `"'$;&|`) {
		t.Fatalf("line %d: RUN %s: quotes, variables or several commands, which this test does not run", build.line, build.args)
	}
	words := strings.Fields(build.args)
	env := []string{}
	for len(words) > 0 && strings.Contains(words[0], "=") {
		env = append(env, words[0])
		words = words[1:]
	}
	if !slices.Contains(env, "CGO_ENABLED=0") {
		t.Errorf("line %d: RUN %s: without CGO_ENABLED=0", build.line, build.args)
	}
	if len(words) < 2 || words[0] != "go" {
		t.Fatalf("line %d: RUN %s: not a go command", build.line, build.args)
	}
	out := ""
	dir := ""
	for i, w := range words {
		switch w {
		case "-o":
			if i+1 < len(words) {
				out = words[i+1]
				words[i+1] = filepath.Join(t.TempDir(), "workwire")
			}
		case "-C":
			if i+1 < len(words) {
				dir = words[i+1]
			}
		}
	}
	if out == "" {
		t.Fatalf("line %d: RUN %s: no -o", build.line, build.args)
	}
	if !slices.Contains(words, "-trimpath") {
		t.Errorf("line %d: RUN %s: without -trimpath", build.line, build.args)
	}
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Join(root, dir) != here {
		t.Errorf("line %d: -C %s is not cmd/workwire, this module", build.line, dir)
	}
	binary := words[slices.Index(words, "-o")+1]
	cmd := exec.Command(words[0], words[1:]...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("line %d: %s (in %s): %v\n%s", build.line, build.args, root, err, out)
	}
	if f, err := elf.Open(binary); err != nil {
		t.Errorf("%s: %v", binary, err)
	} else {
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("the binary is dynamically linked (it has an interpreter): distroless/static has no C library")
			}
		}
		f.Close()
	}
	var stdout bytes.Buffer
	run := exec.Command(binary, "help")
	run.Stdout = &stdout
	if err := run.Run(); err != nil || !strings.Contains(stdout.String(), "broker") {
		t.Errorf("the built binary's help: %v\n%s", err, stdout.String())
	}

	// The final stage copies that binary from the builder and runs it.
	stage := builder[len(builder)-1]
	var copied, user, entrypoint string
	for _, ins := range inss {
		if ins.line < froms[1].line {
			continue
		}
		switch ins.keyword {
		case "COPY":
			if slices.Contains(ins.flags, "--from="+stage) {
				if srcs := strings.Fields(ins.args); len(srcs) == 2 && srcs[0] == out {
					copied = srcs[1]
				}
			}
		case "USER":
			user = ins.args
		case "ENTRYPOINT":
			var argv []string
			if err := json.Unmarshal([]byte(ins.args), &argv); err != nil || len(argv) == 0 {
				t.Errorf("line %d: ENTRYPOINT %s: want the exec form, [\"/workwire\"]", ins.line, ins.args)
			} else {
				entrypoint = argv[0]
			}
		}
	}
	if copied == "" {
		t.Errorf("the final stage does not COPY --from=%s %s", stage, out)
	}
	if entrypoint != copied {
		t.Errorf("ENTRYPOINT %q, want the binary copied, %q", entrypoint, copied)
	}
	if user != "nonroot" {
		t.Errorf("USER %q, want nonroot", user)
	}
}

// goDirective is the version of the go line of the go.mod file at path.
func goDirective(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "go" {
			return f[1]
		}
	}
	t.Fatalf("%s has no go line", path)
	return ""
}
