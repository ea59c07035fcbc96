package options

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
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
			hint := ""
			if strings.HasPrefix(e.Error(), "unknown field ") {
				hint = didYouMean(reflect.TypeOf(into), fe.FieldPath())
			}
			e = fmt.Errorf("%s%w%s", lineOf(data, fe.FieldPath()), e, hint)
		}
		errs = append(errs, e)
	}
	return errors.Join(errs...)
}

// didYouMean returns ` (did you mean "key"?)` for an unknown key at path
// ("tls.cafile", "peers[1].cafile") in a document decoded into t, naming
// the closest key t has at that level, or "" if none is close.
func didYouMean(t reflect.Type, path string) string {
	segs := strings.Split(path, ".")
	for _, seg := range segs[:len(segs)-1] {
		key, _, _ := strings.Cut(seg, "[")
		if t = fieldType(t, key); t == nil {
			return ""
		}
	}
	unknown := strings.ToLower(segs[len(segs)-1])
	best, bestDist := "", 1+len(unknown)/5
	for _, key := range jsonKeys(t) {
		if d := editDistance(unknown, strings.ToLower(key)); d < bestDist {
			best, bestDist = key, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// elem is what a value of t holds keys of: t's element, through pointers,
// slices and maps.
func elem(t reflect.Type) reflect.Type {
	for t != nil {
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
			t = t.Elem()
		default:
			return t
		}
	}
	return nil
}

// jsonFields calls f with each key of a struct type's JSON form and the
// type of its value, as encoding/json names them: by tag, else by field
// name, with untagged embedded structs' keys inline, after the struct's
// own (which hide theirs), until f returns false.
func jsonFields(t reflect.Type, f func(key string, value reflect.Type) bool) bool {
	if t = elem(t); t == nil || t.Kind() != reflect.Struct {
		return true
	}
	var embedded []reflect.Type
	for i := range t.NumField() {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		switch {
		case name == "-" || !sf.IsExported() && !sf.Anonymous:
		case name == "" && sf.Anonymous:
			embedded = append(embedded, sf.Type)
		case name == "":
			if !f(sf.Name, sf.Type) {
				return false
			}
		default:
			if !f(name, sf.Type) {
				return false
			}
		}
	}
	for _, e := range embedded {
		if !jsonFields(e, f) {
			return false
		}
	}
	return true
}

func jsonKeys(t reflect.Type) []string {
	var keys []string
	jsonFields(t, func(key string, _ reflect.Type) bool { keys = append(keys, key); return true })
	return keys
}

// fieldType returns the type of the value at key in t's JSON form, nil if
// it has none.
func fieldType(t reflect.Type, key string) reflect.Type {
	var found reflect.Type
	jsonFields(t, func(k string, v reflect.Type) bool {
		if k == key {
			found = v
			return false
		}
		return true
	})
	return found
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
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
