package proctest_test

import (
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/workwire/sdk-go/internal/testsupport/proctest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A program that ends says how, with its output; one that runs is
// stopped when its test ends.
func TestStart(t *testing.T) {
	p := proctest.Start(t, "short", "/bin/sh", []string{"GREETING=hello"}, "-c", `echo "$GREETING"; exit 3`)
	for deadline := time.Now().Add(time.Minute); p.Exited() == nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the program did not end")
		}
	}
	if err := p.Exited(); !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "hello") {
		t.Errorf("Exited: %v", err)
	}
	var long *proctest.Process
	t.Run("long", func(t *testing.T) { long = proctest.Start(t, "long", "/bin/sleep", nil, "600") })
	if err := long.Exited(); err == nil || !strings.Contains(err.Error(), "terminated") {
		t.Errorf("a program running when its test ended: %v, want it stopped", err)
	}
}
