package kafka_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/workwire/sdk-go/options"
	"github.com/workwire/sdk-go/options/kafka"
	"github.com/workwire/sdk-go/options/kafka/kafkatest"
	"github.com/workwire/sdk-go/options/transporttest"
)

// transportGoroutines returns the stacks of goroutines running this
// package's code (what Close must have waited for), or "" if none runs. A
// goroutine whose only frame of ours is the wrapper that called
// WaitGroup.Done is on its way out and does not count.
func transportGoroutines() string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		lines := strings.Split(string(g), "\n")
		for i := 0; i+1 < len(lines); i++ { // a function, then its file
			fn, file := lines[i], strings.TrimSpace(lines[i+1])
			file, _, _ = strings.Cut(file, ":")
			if strings.HasPrefix(fn, "github.com/workwire/sdk-go/options/kafka.") && !strings.HasSuffix(file, "_test.go") &&
				!strings.Contains(fn, ".goLocked.func") {
				out = append(out, string(g))
				break
			}
		}
	}
	return strings.Join(out, "\n\n")
}

// Start and Close raced, Close landing anywhere from before Start to after
// it: Start returns nil or ErrClosed and nothing else; Close returns only
// after a Start in progress has, and a Start that returns after Close did
// returns ErrClosed; no goroutine of the transport outlives Close; a Start
// that succeeded told its receiver once; and the transport stays closed.
func TestStartCloseRace(t *testing.T) {
	// Not parallel: it inspects every goroutine of the process.
	b := kafkatest.NewBroker(t)
	cfg := kafka.Config{Brokers: b.Addrs()}
	rng := rand.New(rand.NewPCG(7, 11))

	race := func(t *testing.T, subs []options.Subscription, iterations int) {
		ignore := goleak.IgnoreCurrent()
		// How long an undisturbed Start takes, so that Close lands before,
		// during and after it.
		tr := newTransport(t, cfg)
		begin := time.Now()
		start(t, tr, subs)
		span := 2 * time.Since(begin)
		closeNow(t, tr)

		var succeeded, closed, late int
		for i := range iterations {
			tr := newTransport(t, cfg)
			r := transporttest.NewRecorder()
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			closeFirst := i%10 == 0
			if closeFirst {
				closeNow(t, tr)
			}
			result := make(chan error, 1)
			go func() { result <- tr.Start(ctx, subs, r) }()
			// A random delay, not a synchronization: it spreads the Close
			// over the phases of Start.
			time.Sleep(time.Duration(rng.Int64N(int64(span))))
			closeNow(t, tr)
			var err error
			select {
			case err = <-result:
			default:
				// Close returned first: Start had not begun, or it had
				// returned and its goroutine had not passed on the result
				// yet. Either way the switch below holds.
				late++
				select {
				case err = <-result:
				case <-time.After(wait):
					t.Fatalf("iteration %d: Start did not return", i)
				}
			}
			cancel()
			if g := transportGoroutines(); g != "" {
				t.Fatalf("iteration %d: goroutines outlived Close:\n%s", i, g)
			}
			switch {
			case err == nil:
				succeeded++
				if closeFirst {
					t.Fatalf("iteration %d: Start after Close succeeded", i)
				}
				if r.Connects() != 1 {
					t.Fatalf("iteration %d: Start succeeded and told its receiver %d times", i, r.Connects())
				}
			case errors.Is(err, options.ErrClosed):
				closed++
			default:
				t.Fatalf("iteration %d: Start: %v, want nil or ErrClosed", i, err)
			}
			if err := tr.Send(context.Background(), options.Route{Role: options.RoleSpec, Source: "hub", Cluster: "c1"},
				transporttest.NewEvent("after", "spec.create_request")); !errors.Is(err, options.ErrClosed) {
				t.Fatalf("iteration %d: Send after Close: %v, want ErrClosed", i, err)
			}
			if err := tr.Start(context.Background(), subs, r); !errors.Is(err, options.ErrClosed) {
				t.Fatalf("iteration %d: Start after Close: %v, want ErrClosed", i, err)
			}
		}
		t.Logf("Start takes about %v; %d Starts succeeded, %d saw the Close (%d reported after it returned)", span/2, succeeded, closed, late)
		if err := goleak.Find(ignore, goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick")); err != nil {
			t.Error(err)
		}
	}
	t.Run("producer only", func(t *testing.T) { race(t, nil, 100) })
	t.Run("consumer group", func(t *testing.T) { race(t, options.AgentSubscriptions("c1", nil), 20) })
}
