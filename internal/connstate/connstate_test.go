package connstate

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/workwire/sdk-go/options"
)

// lines collects log lines, each prefixed with its verbosity.
type lines []string

func (l *lines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) { *l = append(*l, prefix+" "+args) }, funcr.Options{Verbosity: 2, LogTimestamp: false})
}

// atDefault returns the lines logged at V(0).
func (l lines) atDefault() []string {
	var out []string
	for _, s := range l {
		if strings.Contains(s, `"level"=0`) {
			out = append(out, s)
		}
	}
	return out
}

func newTracker(l *lines) (*Tracker, *time.Time) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	tr := New(l.logger(), "MQTT broker 127.0.0.1:1")
	tr.now = func() time.Time { return now }
	tr.since = now
	return tr, &now
}

// A broker that stays down gets one line at the default level at once,
// then one per ReportInterval however often the transport retries, each
// with the count; every attempt is logged at V(2).
func TestFailuresAreReportedAtOnceThenRateLimited(t *testing.T) {
	var l lines
	tr, now := newTracker(&l)
	refused := errors.New("connection refused")
	tr.Connecting()
	for range 25 { // 25 attempts 1 s apart
		tr.Failed(time.Second, refused)
		*now = now.Add(time.Second)
	}
	got := l.atDefault()
	want := []string{
		`"msg"="connecting"`,
		`"msg"="cannot connect; retrying"`,
		`"msg"="still cannot connect; retrying" "to"="MQTT broker 127.0.0.1:1" "attemptsFailed"=11 "sinceLastReport"=10`,
		`"msg"="still cannot connect; retrying" "to"="MQTT broker 127.0.0.1:1" "attemptsFailed"=21 "sinceLastReport"=10`,
	}
	if len(got) != len(want) {
		t.Fatalf("lines at the default level:\n%s\nwant %d", strings.Join(got, "\n"), len(want))
	}
	for i := range want {
		if !strings.Contains(got[i], want[i]) {
			t.Errorf("line %d: %s\nwant it to contain %s", i, got[i], want[i])
		}
	}
	if !strings.Contains(got[1], `"err"="connection refused"`) || !strings.Contains(got[1], `"retryIn"="1s"`) {
		t.Errorf("the first failure does not say why and when it retries: %s", got[1])
	}
	if v2 := len(l) - len(got); v2 != 25 {
		t.Errorf("%d lines at V(2), want one per attempt (25)", v2)
	}

	// The connection that ends it says so, and a later failure is a first
	// one again.
	l = l[:0]
	tr.Connected()
	tr.Lost(nil)
	tr.Failed(time.Second, refused)
	got = l.atDefault()
	if len(got) != 2 || !strings.Contains(got[0], `"msg"="connected" "to"="MQTT broker 127.0.0.1:1" "afterFailedAttempts"=25`) ||
		!strings.Contains(got[1], `"msg"="cannot connect; retrying"`) {
		t.Errorf("after reconnecting and failing again:\n%s", strings.Join(got, "\n"))
	}
}

// A connection without failures before it is not news at the default level.
func TestAFirstConnectionIsQuiet(t *testing.T) {
	var l lines
	tr, _ := newTracker(&l)
	tr.Connected()
	if got := l.atDefault(); len(got) != 0 {
		t.Errorf("lines at the default level: %q", got)
	}
}

func TestHealthy(t *testing.T) {
	var l lines
	tr, now := newTracker(&l)
	if err := tr.Healthy(); !errors.Is(err, options.ErrNotConnected) || !strings.Contains(err.Error(), "not started") {
		t.Errorf("before connecting: %v", err)
	}
	tr.Failed(time.Second, errors.New("connection refused"))
	err := tr.Healthy()
	if !errors.Is(err, options.ErrNotConnected) || !strings.Contains(err.Error(), "1 attempts failed: connection refused") {
		t.Errorf("after a failure: %v", err)
	}
	tr.Connected()
	if err := tr.Healthy(); err != nil {
		t.Errorf("connected: %v", err)
	}

	// The first report of a loss is its cause; the transport noticing the
	// end later does not overwrite it.
	*now = now.Add(time.Minute)
	cause := errors.New("keep-alive timeout")
	tr.Lost(cause)
	tr.Lost(nil)
	err = tr.Healthy()
	want := fmt.Sprintf("since %s, 0 attempts failed: keep-alive timeout", now.Format(time.RFC3339))
	if !errors.Is(err, cause) || !strings.Contains(err.Error(), want) {
		t.Errorf("after losing the connection: %v, want it to say %q", err, want)
	}

	tr.Closed()
	tr.Connected() // a reconnect racing with Close
	if err := tr.Healthy(); !errors.Is(err, options.ErrClosed) {
		t.Errorf("after Closed: %v, want ErrClosed", err)
	}
}
