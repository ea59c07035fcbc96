package work_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/options/mqtt/mqtttest"
	"github.com/workwire/sdk-go/work"
)

// logLines is a logger that keeps its lines.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, prefix+" "+args)
	}, funcr.Options{Verbosity: 2})
}

func (l *logLines) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}

// A holder given no logger logs — itself, its client and its transport —
// to the logger of the context its Start gets, as Kubernetes components
// hand theirs down; one given a logger keeps it.
func TestHolderLogsToTheLoggerOfStartsContext(t *testing.T) {
	broker := mqtttest.NewBroker(t)
	var fromContext, laterContext, given logLines
	ctx, cancel := context.WithTimeout(logr.NewContext(context.Background(), fromContext.logger()), 20*time.Second)
	defer cancel()

	h, err := work.NewClientHolderBuilder(&mqtt.Config{BrokerHost: broker.Addr()}).WithClusterName("cluster1").NewClientHolder()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	closeHolder(t, h)
	for _, want := range []string{`"msg"="connecting"`, `"msg"="started"`, `"clientID"=`, `"side"="agent"`} {
		if !fromContext.has(want) {
			t.Errorf("the context's logger has no line with %s:\n%s", want, strings.Join(fromContext.lines, "\n"))
		}
	}

	h, err = work.NewClientHolderBuilder(&mqtt.Config{BrokerHost: broker.Addr()}).WithClusterName("cluster1").WithLogger(given.logger()).NewClientHolder()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(logr.NewContext(ctx, laterContext.logger())); err != nil {
		t.Fatal(err)
	}
	closeHolder(t, h)
	if laterContext.has(`"msg"`) || !given.has(`"msg"="connecting"`) || !given.has(`"msg"="started"`) {
		t.Errorf("with WithLogger: the context's logger got %q; the given one %q", laterContext.lines, given.lines)
	}
}
