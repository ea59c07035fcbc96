package options

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

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

// Unmarshal decodes YAML or JSON (JSON is YAML) into into, strictly.
func Unmarshal(data []byte, into any) error {
	return yaml.UnmarshalStrict(data, into)
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
