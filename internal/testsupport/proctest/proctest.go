// Package proctest runs the programs a test needs beside it — etcd and
// kube-apiserver, OCM's released programs — as processes: each one's
// output kept in a file of the test's, each stopped when the test ends
// (SIGTERM, then SIGKILL after 10 s) and, on Linux, killed by the kernel
// if the test binary dies without its cleanup.
package proctest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Process is a program running for a test.
type Process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// Start runs bin with args, and env added to the test's environment, until
// t ends.
func Start(t testing.TB, name, bin string, env []string, args ...string) *Process {
	t.Helper()
	log := filepath.Join(t.TempDir(), name+".log")
	out, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), env...)
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		_ = out.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	p := &Process{name: name, cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = out.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// Name returns the name the process was started under.
func (p *Process) Name() string { return p.name }

// Tail returns the last n lines of the process's output.
func (p *Process) Tail(n int) string {
	data, err := os.ReadFile(p.log)
	if err != nil {
		return fmt.Sprintf("%s: %v", p.name, err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	return string(bytes.Join(lines[max(0, len(lines)-n):], []byte("\n")))
}

// Kill kills the process with SIGKILL, as a crash ends it, and returns once
// it has ended.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Wait waits up to d for the process to end and returns how it ended, or
// nil if it runs still.
func (p *Process) Wait(d time.Duration) *os.ProcessState {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-p.done:
		return p.cmd.ProcessState
	case <-timer.C:
		return nil
	}
}

// Output returns all the process has written so far, stdout and stderr.
func (p *Process) Output() string {
	data, err := os.ReadFile(p.log)
	if err != nil {
		return fmt.Sprintf("%s: %v", p.name, err)
	}
	return string(data)
}

// Exited returns nil while the process runs, and once it has ended, an
// error saying how, with the end of its output: for a wait that should
// stop early.
func (p *Process) Exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited (%v):\n%s", p.name, p.cmd.ProcessState, p.Tail(30))
	default:
		return nil
	}
}
