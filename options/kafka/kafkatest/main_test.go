package kafkatest_test

import (
	"testing"

	"go.uber.org/goleak"
)

// sarama's consumer registers a fetch meter in go-metrics' global registry,
// whose first meter starts one process-wide ticker goroutine that nothing
// can stop; it is the only goroutine allowed to outlive the tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"))
}
