package interop

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/workwire/sdk-go/internal/testsupport/proctest"
)

// EnvOCMPrograms names the directory of OCM v1.2.0's programs —
// registration, work and server, built from internal/tools/ocmprograms (.ci/run
// builds them once per version into a cache) — that the tests of this file
// run as processes beside workwire's. Unset, they skip.
const EnvOCMPrograms = "WORKWIRE_OCM_PROGRAMS"

// ocmProgram returns the path of OCM's program name, or skips t.
func ocmProgram(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv(EnvOCMPrograms)
	if dir == "" {
		t.Skipf("OCM's programs are not built: set %s to their directory (.ci/run builds them from internal/tools/ocmprograms)", EnvOCMPrograms)
	}
	bin := filepath.Join(dir, name)
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s names %s: %v", EnvOCMPrograms, dir, err)
	}
	return bin
}

// startProgram runs bin with args, and extra environment env, until t
// ends; when t failed (or runs verbose) its log shows the program's last
// lines.
func startProgram(t *testing.T, name, bin string, env []string, args ...string) *proctest.Process {
	t.Helper()
	p := proctest.Start(t, name, bin, env, args...)
	t.Cleanup(func() {
		if t.Failed() || testing.Verbose() {
			t.Logf("%s's log (last lines):\n%s", name, p.Tail(60))
		}
	})
	return p
}

// waitFor polls cond until it holds, failing t at the deadline or as soon
// as one of procs exits.
func waitFor(t *testing.T, what string, within time.Duration, procs []*proctest.Process, cond func() bool) {
	t.Helper()
	start := time.Now()
	for deadline := start.Add(within); !cond(); time.Sleep(100 * time.Millisecond) {
		for _, p := range procs {
			if err := p.Exited(); err != nil {
				t.Fatalf("waiting for %s: %v", what, err)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
	}
	t.Logf("%s after %s", what, time.Since(start).Round(100*time.Millisecond))
}

// freeListen returns a loopback address whose port the OS just chose, for
// a program's own health endpoint.
func freeListen(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// yamlFile writes lines as a YAML file.
func yamlFile(t *testing.T, name string, lines ...string) string {
	t.Helper()
	return writeFile(t, name, strings.Join(lines, "\n")+"\n")
}
