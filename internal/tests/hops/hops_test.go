// Package hops keeps one work's round trip through the library from
// growing: it traces every call of the library's functions while
// testdata/roundtrip carries a work from a hub's Create to the hub's
// informer and back, and bounds the calls, the calls that cross from one
// package to another, and the calls back up the layers (into a package that
// imports the caller's: a callback). A resync the two starts began late
// is no part of the path, and its calls are left out. ARCHITECTURE.md's
// hop table lists the crossings; every call back up must be one it names.
//
// It needs Delve: set WORKWIRE_DLV to a dlv binary (.ci/run installs one).
package hops

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/workwire/sdk-go"

// The bounds: what the round trip took when they were set, with a little
// room for calls and crossings, which the goroutines' interleaving varies
// (a queue's merges, a timer). Calls back up the layers do not vary and
// have none: six is what the design allows. A change that lowers them
// lowers these too.
const (
	maxCalls     = 360
	maxCrossings = 61
	maxBackUp    = 6
)

// call is one traced call: caller and callee, as Delve names functions.
type call struct{ caller, callee string }

func TestTheRoundTripDoesNotGrow(t *testing.T) {
	dlv := os.Getenv("WORKWIRE_DLV")
	if dlv == "" {
		t.Skip("set WORKWIRE_DLV to a dlv binary (go install github.com/go-delve/delve/cmd/dlv@v1.27.2) to trace the round trip")
	}
	bin := filepath.Join(t.TempDir(), "roundtrip")
	if out, err := exec.Command("go", "build", "-o", bin, "./testdata/roundtrip").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	var trace bytes.Buffer
	cmd := exec.Command(dlv, "trace", "--check-go-version=false", "-e", bin, "-s", "40",
		`^(github\.com/workwire/sdk-go/.*|main\.roundTrip.*)$`)
	cmd.Stderr = &trace
	if err := cmd.Run(); err != nil {
		t.Fatalf("dlv trace: %v\n%s", err, tail(trace.String()))
	}
	calls := roundTrip(t, trace.String())
	height := heights(t)

	crossings, backUp := 0, map[string]int{}
	for _, c := range calls {
		from, to := pkgOf(c.caller), pkgOf(c.callee)
		if from == "" || from == to {
			continue // a call from outside the library, or within a package
		}
		crossings++
		if height[from] < height[to] {
			backUp[short(c.caller)+" → "+short(c.callee)]++
		}
	}
	n := 0
	for _, k := range backUp {
		n += k
	}
	t.Logf("round trip: %d calls, %d across packages, %d back up the layers", len(calls), crossings, n)
	for hop, k := range backUp {
		t.Logf("  back up: %s ×%d", hop, k)
	}
	if len(calls) > maxCalls {
		t.Errorf("%d calls, at most %d", len(calls), maxCalls)
	}
	if crossings > maxCrossings {
		t.Errorf("%d calls across packages, at most %d", crossings, maxCrossings)
	}
	if n > maxBackUp {
		t.Errorf("%d calls back up the layers, at most %d", n, maxBackUp)
	}
	table, err := os.ReadFile("../../../ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	for hop := range backUp {
		from, to, _ := strings.Cut(hop, " → ")
		if !bytes.Contains(table, []byte("`"+from+"`")) || !bytes.Contains(table, []byte("`"+to+"`")) {
			t.Errorf("back up the layers and not in ARCHITECTURE.md's hop table: %s", hop)
		}
	}
}

// roundTrip returns the library's calls between the program's markers,
// leaving out the JSON scanners' own calls (a document's parse, not the
// path) and test support.
func roundTrip(t *testing.T, trace string) []call {
	t.Helper()
	frame := regexp.MustCompile(`^\s+\d+\s+0x[0-9a-f]+ in (\S+)`)
	ansi := regexp.MustCompile("\x1b\\[[0-9;]*m")
	var calls []call
	var frames []string
	on, ended := false, false
	flush := func() {
		defer func() { frames = frames[:0] }()
		if len(frames) == 0 {
			return
		}
		callee, caller := frames[0], ""
		if len(frames) > 1 {
			caller = frames[1]
		}
		switch {
		case callee == "main.roundTripBegins":
			on = true
		case callee == "main.roundTripEnds":
			on, ended = false, true
		case on && counted(callee) && !slices.ContainsFunc(frames, resyncing.MatchString):
			calls = append(calls, call{caller: caller, callee: callee})
		}
	}
	sc := bufio.NewScanner(strings.NewReader(ansi.ReplaceAllString(trace, "")))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "> goroutine("), strings.HasPrefix(line, ">> goroutine("):
			flush()
			if strings.HasPrefix(line, ">>") {
				frames = append(frames[:0], "") // a return: no call
			}
		default:
			if m := frame.FindStringSubmatch(line); m != nil {
				frames = append(frames, m[1])
			}
		}
	}
	flush()
	if !ended {
		t.Fatalf("the trace has no round trip:\n%s", tail(trace))
	}
	return calls
}

// resyncing matches the functions of a resync, of a source's round of
// specs sent again, and of the delivery check's loop: one that a restart
// of either side started late enough, or a timer that fired, during the
// round trip is not part of its path, whatever it calls.
var resyncing = regexp.MustCompile(`^` + regexp.QuoteMeta(module) + `/generic\.(\(\*(Source|Agent)Client\[.*\]\)\.(answerResync|requestResync|resendLoop)|\(\*hearing\)\.run)$`)

// counted reports whether a call of fn is part of the path.
func counted(fn string) bool {
	p := pkgOf(fn)
	if p == "" || strings.Contains(fn, "deferwrap") || strings.Contains(p, "testsupport") || strings.HasSuffix(p, "test") {
		return false
	}
	name := strings.TrimPrefix(fn, module+"/"+p+".")
	return p != "internal/jsonscan" && !(p == "codec" && codecScanner.MatchString(name))
}

// codecScanner matches the codec's JSON scanners, left out as jsonscan is.
var codecScanner = regexp.MustCompile(`^(\(\*parser\)|parse|fast|unmarshal)`)

// pkgOf is fn's package below the module ("" for the module's root and
// what is outside it).
func pkgOf(fn string) string {
	rest, ok := strings.CutPrefix(fn, module+"/")
	if !ok {
		return ""
	}
	rest = strings.FieldsFunc(rest, func(r rune) bool { return r == '[' || r == '(' })[0]
	dir, last := "", rest
	if i := strings.LastIndex(rest, "/"); i >= 0 {
		dir, last = rest[:i+1], rest[i+1:]
	}
	name, _, _ := strings.Cut(last, ".")
	return dir + name
}

var (
	typeArgs = regexp.MustCompile(`\[[^\]]*\]+`)
	closure  = regexp.MustCompile(`(\.func\d+)+$|-fm$`)
)

// short is fn as the hop table names it: package.Function or
// package.Type.Method, without type arguments and receivers' stars; a
// closure by the function it is in (the compiler numbers them).
func short(fn string) string {
	p := pkgOf(fn)
	name := strings.TrimPrefix(fn, module+"/"+p+".")
	name = typeArgs.ReplaceAllString(name, "")
	name = closure.ReplaceAllString(name, "")
	name = strings.NewReplacer("(*", "", ")", "").Replace(name)
	return p + "." + name
}

// heights returns each package's height in the module's import graph: one
// more than the highest package it imports.
func heights(t *testing.T) map[string]int {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, module+"/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		p := strings.TrimPrefix(f[0], module+"/")
		for _, imp := range f[1:] {
			if q, ok := strings.CutPrefix(imp, module+"/"); ok {
				imports[p] = append(imports[p], q)
			}
		}
	}
	h := map[string]int{}
	var height func(string) int
	height = func(p string) int {
		if v, ok := h[p]; ok {
			return v
		}
		h[p] = 0
		m := 0
		for _, q := range imports[p] {
			m = max(m, height(q))
		}
		h[p] = m + 1
		return m + 1
	}
	for p := range imports {
		height(p)
	}
	return h
}

func tail(s string) string {
	if len(s) > 4000 {
		return s[len(s)-4000:]
	}
	return s
}
