package kafka

import (
	"reflect"

	metrics "github.com/rcrowley/go-metrics"
)

// nopRegistry is the go-metrics registry the transport gives sarama: it
// keeps nothing and hands out no-op meters, counters and histograms. sarama
// otherwise records a dozen meters and histograms per broker and request
// (costing allocations on every request), and its first meter starts a
// process-wide go-metrics goroutine that never ends. workwire reports its
// own metrics through the generic clients' observer; to get sarama's, set a
// registry with WithSaramaConfig (Config.MetricRegistry).
type nopRegistry struct{}

var _ metrics.Registry = nopRegistry{}

func (nopRegistry) Each(func(string, any))            {}
func (nopRegistry) Get(string) any                    { return nil }
func (nopRegistry) GetAll() map[string]map[string]any { return nil }
func (nopRegistry) Register(string, any) error        { return nil }
func (nopRegistry) RunHealthchecks()                  {}
func (nopRegistry) Unregister(string)                 {}
func (nopRegistry) UnregisterAll()                    {}

// GetOrRegister returns a no-op metric of the kind the constructor in m
// makes, without calling constructors that start goroutines.
func (nopRegistry) GetOrRegister(_ string, m any) any {
	switch m.(type) {
	case func() metrics.Meter:
		return metrics.NilMeter{}
	case func() metrics.Counter:
		return metrics.NilCounter{}
	case func() metrics.Histogram:
		return metrics.NilHistogram{}
	case func() metrics.Timer:
		return metrics.NilTimer{}
	case func() metrics.Gauge:
		return metrics.NilGauge{}
	case func() metrics.GaugeFloat64:
		return metrics.NilGaugeFloat64{}
	case func() metrics.EWMA:
		return metrics.NilEWMA{}
	}
	// Another lazy constructor: call it (what StandardRegistry does), so the
	// caller gets the type it asserts. A metric value is handed back.
	if v := reflect.ValueOf(m); v.Kind() == reflect.Func && v.Type().NumIn() == 0 && v.Type().NumOut() == 1 {
		return v.Call(nil)[0].Interface()
	}
	return m
}
