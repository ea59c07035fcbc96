package main

import (
	"sort"
	"sync"

	"github.com/go-logr/logr"
)

// logCounts counts the lines both SDKs (and the libraries under them) log
// at verbosity 0, by message, and discards them: neither SDK counts what
// it drops, and its logs are how it tells. Higher verbosities are off, so
// they cost what they cost in production.
type logCounts struct {
	mu      sync.Mutex
	counts  map[string]int
	example map[string]string
}

func newLogCounts() *logCounts {
	return &logCounts{counts: map[string]int{}, example: map[string]string{}}
}

// logger returns a logger that counts into c.
func (c *logCounts) logger() logr.Logger { return logr.New(countingSink{c}) }

func (c *logCounts) add(msg, example string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts[msg]++
	if _, ok := c.example[msg]; !ok {
		c.example[msg] = example
	}
}

// LogCount is how often one message was logged, and its first error.
type LogCount struct {
	Message string `json:"message"`
	Count   int    `json:"count"`
	Example string `json:"example,omitempty"`
}

// sorted returns the counts, most frequent first.
func (c *logCounts) sorted() []LogCount {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]LogCount, 0, len(c.counts))
	for msg, n := range c.counts {
		out = append(out, LogCount{Message: msg, Count: n, Example: c.example[msg]})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Message < out[j].Message
	})
	return out
}

type countingSink struct{ c *logCounts }

func (countingSink) Init(logr.RuntimeInfo)  {}
func (countingSink) Enabled(level int) bool { return level <= 0 }
func (s countingSink) Info(_ int, msg string, _ ...any) {
	s.c.add(msg, "")
}

func (s countingSink) Error(err error, msg string, _ ...any) {
	example := ""
	if err != nil {
		example = err.Error()
		if len(example) > 200 {
			example = example[:200] + "…"
		}
	}
	s.c.add("error: "+msg, example)
}
func (s countingSink) WithValues(...any) logr.LogSink { return s }
func (s countingSink) WithName(string) logr.LogSink   { return s }
