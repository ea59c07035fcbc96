package interop

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

// logCounter counts the log lines whose message contains one of the
// patterns it watches: how an OCM peer tells that it dropped something, for
// it has no counter of its own. Each OCM peer logs to one through its
// context. Everything else logged is discarded, so the tests' output stays
// readable; set WORKWIRE_INTEROP_LOG to a verbosity (0 and up) to see it
// on standard error.
type logCounter struct {
	mu       sync.Mutex
	patterns []string
	counts   map[string]int
	samples  map[string]string
}

// OCM sources' lines for a status they drop and never ask for again
// (open-cluster-management.io/sdk-go v1.3.0, clients/work/store/base.go).
const (
	logBadSequence   = "invalid sequenceID for work"
	logOlderSequence = "the work current sequenceID is less than its last"
	logNewerGen      = "the work generation is greater than its local generation"
)

func newLogCounter(patterns ...string) *logCounter {
	return &logCounter{patterns: patterns, counts: map[string]int{}, samples: map[string]string{}}
}

// verbose is WORKWIRE_INTEROP_LOG, a verbosity: print every log line up to
// it ("0" for the default level).
var verbose, verbosity = func() (bool, int) {
	v, err := strconv.Atoi(os.Getenv("WORKWIRE_INTEROP_LOG"))
	return err == nil, v
}()

func (c *logCounter) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		line := prefix + " " + args
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, p := range c.patterns {
			if strings.Contains(line, p) {
				c.counts[p]++
				if _, ok := c.samples[p]; !ok {
					c.samples[p] = line
				}
			}
		}
		if verbose {
			fmt.Fprintln(os.Stderr, line)
		}
	}, funcr.Options{Verbosity: verbosity})
}

// count returns how many lines matched p so far.
func (c *logCounter) count(p string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[p]
}

func (c *logCounter) sample(p string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.samples[p]
}
