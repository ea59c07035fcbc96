// Package cmdtest runs an example command as its users do, from its tests:
// the test binary runs the command's main when ArgsEnv is set.
package cmdtest

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// ArgsEnv names the environment variable that makes a test binary run its
// command's main with these (space-separated) arguments. A TestMain checks
// it with RunMain.
const ArgsEnv = "WORKWIRE_EXAMPLE_ARGS"

// RunMain runs main as the command named name when ArgsEnv is set, and then
// exits.
func RunMain(name string, main func()) {
	args, ok := os.LookupEnv(ArgsEnv)
	if !ok {
		return
	}
	os.Args = append([]string{name}, strings.Fields(args)...)
	main()
	os.Exit(0)
}

// FirstConnectFailure runs the command with args against a broker that is
// not there and returns what it logged up to and including the line that
// reports its first failed connection, and how long that line took. It
// fails t if the command ends first, or says nothing of the kind in a
// minute. It interrupts the command and waits for it before it returns.
func FirstConnectFailure(t *testing.T, args ...string) (lines []string, took time.Duration) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), ArgsEnv+"="+strings.Join(args, " "))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() {
			_, _ = io.Copy(io.Discard, stderr) // until the command exits
			_ = cmd.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	// A command that never reports is ended, which ends the scan.
	timer := time.AfterFunc(time.Minute, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if strings.Contains(sc.Text(), "cannot connect; retrying") {
			return lines, time.Since(begin)
		}
	}
	t.Fatalf("the command ended without reporting a failed connection:\n%s", strings.Join(lines, "\n"))
	return nil, 0
}

// CheckFirstFailure checks what FirstConnectFailure returned: the command
// said it was connecting to addr, then reported the first failure (not a
// later one) and its cause.
func CheckFirstFailure(t *testing.T, lines []string, addr string) {
	t.Helper()
	last := lines[len(lines)-1]
	connecting := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, `"connecting"`) && strings.Contains(l, addr) })
	if connecting < 0 || strings.Contains(last, "still cannot connect") || !strings.Contains(last, "connection refused") {
		t.Errorf("want a line saying it connects to %s, then the first failure and its cause; got:\n%s", addr, strings.Join(lines, "\n"))
	}
}
