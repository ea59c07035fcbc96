package options

import (
	"errors"
	"fmt"
	"strings"
)

// Placeholders a Layout template may use, each as a whole topic level.
const (
	SourcePlaceholder  = "{source}"
	ClusterPlaceholder = "{cluster}"
)

// Layout maps each Role to a topic template. Templates are "/"-separated
// levels; a level is a literal or a placeholder ({source}, {cluster}).
// Subscriptions put "+" where an ID is "any".
type Layout struct {
	// Spec is where a source sends specs to one cluster; needs {source} and {cluster}.
	Spec string `json:"spec"`
	// Status is where an agent sends statuses to one source; needs {source} and {cluster}.
	Status string `json:"status"`
	// SpecResync is where an agent asks every source to resync; needs {cluster}, not {source}.
	SpecResync string `json:"specResync"`
	// StatusResync is where a source asks every agent to resync; needs {source}, not {cluster}.
	StatusResync string `json:"statusResync"`
}

// WorkwireLayout is the default layout (docs/protocol.md, "MQTT"): every
// topic of a source under sources/{source}, each level named by its role.
var WorkwireLayout = Layout{
	Spec:         "sources/{source}/clusters/{cluster}/spec",
	Status:       "sources/{source}/clusters/{cluster}/status",
	SpecResync:   "sources/clusters/{cluster}/specresync",
	StatusResync: "sources/{source}/clusters/statusresync",
}

// SeedLayout is WorkwireLayout under its first name.
//
// Deprecated: use WorkwireLayout.
var SeedLayout = WorkwireLayout

// OCMLayout is the layout existing Open Cluster Management deployments use;
// choose it to interoperate with agents and sources built on
// open-cluster-management.io/sdk-go.
var OCMLayout = Layout{
	Spec:         "sources/{source}/clusters/{cluster}/sourceevents",
	Status:       "sources/{source}/clusters/{cluster}/agentevents",
	SpecResync:   "clusters/{cluster}/agentbroadcast",
	StatusResync: "sources/{source}/sourcebroadcast",
}

// LayoutByName returns the preset called "workwire" (the default, also
// accepted as "seed", its first name) or "ocm".
func LayoutByName(name string) (Layout, error) {
	switch name {
	case "", "workwire", "seed":
		return WorkwireLayout, nil
	case "ocm":
		return OCMLayout, nil
	default:
		return Layout{}, fmt.Errorf("unknown topic layout %q (want workwire or ocm)", name)
	}
}

func (l Layout) template(r Role) string {
	switch r {
	case RoleSpec:
		return l.Spec
	case RoleStatus:
		return l.Status
	case RoleSpecResync:
		return l.SpecResync
	case RoleStatusResync:
		return l.StatusResync
	}
	return ""
}

var roles = [...]Role{RoleSpec, RoleStatus, RoleSpecResync, RoleStatusResync}

// Topics is a compiled Layout. It is immutable and goroutine-safe.
type Topics struct {
	levels [len(roles)][]string
}

// Compile validates every template of l and returns its compiled form. It
// reports every problem at once.
func (l Layout) Compile() (*Topics, error) {
	t := &Topics{}
	var errs []error
	for i, r := range roles {
		levels, err := compileTemplate(r, l.template(r))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		t.levels[i] = levels
	}
	if len(errs) == 0 {
		errs = append(errs, t.checkDistinct()...)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("topic layout: %w", errors.Join(errs...))
	}
	return t, nil
}

// Validate reports every problem of l's templates.
func (l Layout) Validate() error {
	_, err := l.Compile()
	return err
}

func compileTemplate(r Role, tmpl string) ([]string, error) {
	if tmpl == "" {
		return nil, fmt.Errorf("%s: template is empty", r)
	}
	levels := strings.Split(tmpl, "/")
	var hasSource, hasCluster bool
	for _, lv := range levels {
		switch lv {
		case SourcePlaceholder:
			if hasSource {
				return nil, fmt.Errorf("%s: %q uses {source} twice", r, tmpl)
			}
			hasSource = true
		case ClusterPlaceholder:
			if hasCluster {
				return nil, fmt.Errorf("%s: %q uses {cluster} twice", r, tmpl)
			}
			hasCluster = true
		default:
			if strings.ContainsAny(lv, "+#{}\x00") {
				return nil, fmt.Errorf("%s: %q: level %q must be a literal or a whole placeholder", r, tmpl, lv)
			}
		}
	}
	if strings.HasPrefix(tmpl, "$") {
		return nil, fmt.Errorf("%s: %q: topics starting with '$' are reserved by brokers", r, tmpl)
	}
	needSource := r == RoleSpec || r == RoleStatus || r == RoleStatusResync
	needCluster := r == RoleSpec || r == RoleStatus || r == RoleSpecResync
	switch {
	case needSource && !hasSource:
		return nil, fmt.Errorf("%s: %q lacks {source}", r, tmpl)
	case needCluster && !hasCluster:
		return nil, fmt.Errorf("%s: %q lacks {cluster}", r, tmpl)
	case !needSource && hasSource:
		return nil, fmt.Errorf("%s: %q must not use {source} (it goes to every source)", r, tmpl)
	case !needCluster && hasCluster:
		return nil, fmt.Errorf("%s: %q must not use {cluster} (it goes to every cluster)", r, tmpl)
	}
	return levels, nil
}

// checkDistinct makes sure no topic can match two roles' templates, so a
// received topic always tells its role.
func (t *Topics) checkDistinct() []error {
	var errs []error
	for i := range roles {
		for j := i + 1; j < len(roles); j++ {
			if overlap(t.levels[i], t.levels[j]) {
				errs = append(errs, fmt.Errorf("%s and %s templates can match the same topic", roles[i], roles[j]))
			}
		}
	}
	return errs
}

func overlap(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !isPlaceholder(a[k]) && !isPlaceholder(b[k]) && a[k] != b[k] {
			return false
		}
	}
	return true
}

func isPlaceholder(lv string) bool { return lv == SourcePlaceholder || lv == ClusterPlaceholder }

// ValidateID reports whether id can stand in a topic level: non-empty, with
// no '/', '+', '#' or NUL.
func ValidateID(kind, id string) error {
	if id == "" {
		return fmt.Errorf("%s is empty", kind)
	}
	if strings.ContainsAny(id, "/+#\x00") {
		return fmt.Errorf("%s %q must not contain '/', '+', '#' or NUL", kind, id)
	}
	return nil
}

// Topic returns the topic route r is sent to.
func (t *Topics) Topic(r Route) (string, error) {
	if err := r.Validate(); err != nil {
		return "", err
	}
	return t.fill(r.Role, r.Source, r.Cluster, false, false) // Validate checked the IDs
}

// Filter returns the topic filter that subscribes to s, with "+" where s
// leaves an ID empty.
func (t *Topics) Filter(s Subscription) (string, error) {
	return t.fill(s.Role, s.Source, s.Cluster, true, true)
}

// fill expands r's template with source and cluster: "+" for an empty one
// if wildcard; each checked (ValidateID) if checkIDs, else only that it is
// there.
func (t *Topics) fill(r Role, source, cluster string, wildcard, checkIDs bool) (string, error) {
	if r < RoleSpec || r > RoleStatusResync {
		return "", fmt.Errorf("unknown role %d", int(r))
	}
	var b strings.Builder
	for k, lv := range t.levels[r-1] {
		if k > 0 {
			b.WriteByte('/')
		}
		id, kind := "", ""
		switch lv {
		case SourcePlaceholder:
			id, kind = source, "source"
		case ClusterPlaceholder:
			id, kind = cluster, "cluster"
		default:
			b.WriteString(lv)
			continue
		}
		if id == "" && wildcard {
			b.WriteByte('+')
			continue
		}
		if checkIDs || id == "" {
			if err := ValidateID(kind, id); err != nil {
				return "", fmt.Errorf("%s topic: %w", r, err)
			}
		}
		b.WriteString(id)
	}
	return b.String(), nil
}

// Match returns the route a received topic stands for. A shared-subscription
// prefix is not part of received topics. ok is false for a topic that
// matches no template.
func (t *Topics) Match(topic string) (r Route, ok bool) {
	n := strings.Count(topic, "/") + 1
	for i, levels := range t.levels {
		if len(levels) != n {
			continue
		}
		route, ok := matchLevels(levels, topic)
		if ok {
			route.Role = roles[i]
			return route, true
		}
	}
	return Route{}, false
}

func matchLevels(levels []string, topic string) (Route, bool) {
	var r Route
	rest := topic
	for k, lv := range levels {
		seg := rest
		if k < len(levels)-1 {
			i := strings.IndexByte(rest, '/')
			seg, rest = rest[:i], rest[i+1:]
		}
		switch lv {
		case SourcePlaceholder:
			if seg == "" {
				return Route{}, false
			}
			r.Source = seg
		case ClusterPlaceholder:
			if seg == "" {
				return Route{}, false
			}
			r.Cluster = seg
		default:
			if seg != lv {
				return Route{}, false
			}
		}
	}
	return r, true
}
