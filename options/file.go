package options

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	yamlv3 "go.yaml.in/yaml/v3"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// LoadFile reads a YAML or JSON config file into into, which must be a
// pointer to a typed config struct. Unknown fields are errors, so a typo
// never silently falls back to a default.
func LoadFile(path string, into any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("load config: %w", err)
	}
	if err := Unmarshal(data, into); err != nil {
		return fmt.Errorf("load config %s: %w", path, err)
	}
	return nil
}

// Unmarshal decodes YAML or JSON (JSON is YAML) into into as Kubernetes
// decodes its objects: keys match field names exactly (case-sensitive), and
// unknown or duplicate keys are errors. Errors say the line of the file.
func Unmarshal(data []byte, into any) error {
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "error converting YAML to JSON: "))
	}
	strict, err := kjson.UnmarshalStrict(j, into)
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return fmt.Errorf("%s%s: want %s, not %s", lineOf(data, typeErr.Field), typeErr.Field, typeErr.Type, typeErr.Value)
	case err != nil:
		return err
	}
	errs := make([]error, 0, len(strict))
	for _, e := range strict {
		if fe, ok := e.(kjson.FieldError); ok {
			e = fmt.Errorf("%s%w", lineOf(data, fe.FieldPath()), e)
		}
		errs = append(errs, e)
	}
	return errors.Join(errs...)
}

// lineOf returns "line N: " for the key at path ("tls.caFile",
// "brokers[1]") in the YAML document data, or "" if it cannot tell.
func lineOf(data []byte, path string) string {
	var doc yamlv3.Node
	if yamlv3.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
		return ""
	}
	node, line := doc.Content[0], 0
	for _, seg := range strings.Split(path, ".") {
		key, index, hasIndex := strings.Cut(seg, "[")
		var found bool
		if node, line, found = child(node, key); !found {
			return ""
		}
		if hasIndex {
			i, err := strconv.Atoi(strings.TrimSuffix(index, "]"))
			if err != nil || node.Kind != yamlv3.SequenceNode || i < 0 || i >= len(node.Content) {
				return ""
			}
			node = node.Content[i]
			line = node.Line
		}
	}
	return fmt.Sprintf("line %d: ", line)
}

// child returns the value of key in the mapping node n, and the key's line.
func child(n *yamlv3.Node, key string) (*yamlv3.Node, int, bool) {
	if n.Kind != yamlv3.MappingNode {
		return nil, 0, false
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1], n.Content[i].Line, true
		}
	}
	return nil, 0, false
}

// Duration is a time.Duration that config files write as "30s", "5m" or a
// number of seconds.
type Duration time.Duration

// UnmarshalJSON accepts a Go duration string or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	s := strings.TrimSpace(string(b))
	if s == "null" {
		return nil
	}
	if strings.HasPrefix(s, `"`) {
		var str string
		if err := json.Unmarshal(b, &str); err != nil {
			return err
		}
		v, err := time.ParseDuration(str)
		if err != nil {
			return fmt.Errorf("duration %q: %w", str, err)
		}
		*d = Duration(v)
		return nil
	}
	secs, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return fmt.Errorf("duration %s: want \"30s\" or a number of seconds", s)
	}
	// A float64 of nanoseconds converts to an int64 only within its range;
	// beyond it (or for NaN) the conversion gives any value at all.
	ns := secs * float64(time.Second)
	if math.IsNaN(ns) || ns >= math.MaxInt64 || ns <= math.MinInt64 {
		return fmt.Errorf("duration %s: out of range (at most about 292 years)", s)
	}
	*d = Duration(time.Duration(ns))
	return nil
}

// MarshalJSON writes d as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// Default sets *field to def if it holds its zero value: how each config
// fills in its defaults, once, when its transport is made.
func Default[T comparable](field *T, def T) {
	var zero T
	if *field == zero {
		*field = def
	}
}

// Validator is a config that can check itself.
type Validator interface{ Validate() error }

// LoadConfig reads a C from a YAML or JSON file (see LoadFile) and
// validates it.
func LoadConfig[C Validator](path string) (C, error) {
	var c, zero C
	if err := LoadFile(path, &c); err != nil {
		return zero, err
	}
	if err := c.Validate(); err != nil {
		return zero, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}
