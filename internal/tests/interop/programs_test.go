package interop

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workwire/sdk-go/internal/testsupport/proctest"
)

// EnvOCMPrograms names the directories of OCM's programs, one release
// each, as a list like $PATH's — registration, work and server, built from
// internal/tools/ocmprograms/ocm-<version> (.ci/run builds them once per
// version into a cache, ocm-v1.2.0 and ocm-v1.3.1) — that the tests of this
// file run as processes beside workwire's, each against every release.
// Unset, they skip.
const EnvOCMPrograms = "WORKWIRE_OCM_PROGRAMS"

// ocmRelease is one release of OCM's programs: a directory of
// EnvOCMPrograms, named by its base name less "ocm-" (v1.3.1).
type ocmRelease struct{ name, dir string }

// forEachOCMRelease runs test once for each release of OCM's programs, as
// parallel subtests named by it (each has its kube-apiservers and
// processes; they spend their time waiting on OCM's programs), or skips t
// when none is built.
func forEachOCMRelease(t *testing.T, test func(t *testing.T, ocm ocmRelease)) {
	t.Helper()
	dirs := filepath.SplitList(os.Getenv(EnvOCMPrograms))
	if len(dirs) == 0 {
		t.Skipf("OCM's programs are not built: set %s to their directories (.ci/run builds them from internal/tools/ocmprograms)", EnvOCMPrograms)
	}
	for _, dir := range dirs {
		r := ocmRelease{name: strings.TrimPrefix(filepath.Base(dir), "ocm-"), dir: dir}
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			test(t, r)
		})
	}
}

// program returns the path of the release's program name.
func (r ocmRelease) program(t *testing.T, name string) string {
	t.Helper()
	bin := filepath.Join(r.dir, name)
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s names %s: %v", EnvOCMPrograms, r.dir, err)
	}
	return bin
}

// helps holds each program command's --help, by binary and command.
var helps sync.Map

// ifListed returns those of flags (--name or --name=value) that bin's
// command lists in its --help: a flag one release has and another dropped
// (v1.3's server grpc elects no leader, so it has no
// --disable-leader-election) is passed where it is known.
func ifListed(t *testing.T, bin, command string, flags ...string) []string {
	t.Helper()
	key := bin + " " + command
	help, ok := helps.Load(key)
	if !ok {
		out, err := exec.Command(bin, command, "--help").CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s --help: %v\n%s", bin, command, err, out)
		}
		help, _ = helps.LoadOrStore(key, string(out))
	}
	var out []string
	for _, f := range flags {
		name, _, _ := strings.Cut(f, "=")
		if strings.Contains(help.(string), "  "+name+" ") || strings.Contains(help.(string), "  "+name+"\n") {
			out = append(out, f)
		}
	}
	return out
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
