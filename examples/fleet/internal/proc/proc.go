// Package proc runs the fleet's parts as processes of their own: each
// one's output in a log file, each stopped when the harness stops it and,
// on Linux, killed by the kernel when the harness dies without stopping
// it, and each measured (peak resident set, CPU seconds) from /proc. It is
// Linux's alone, as the harness is.
//go:build linux

package proc

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process is a part of the fleet running as a process.
type Process struct {
	Name     string
	dir, bin string
	args     []string
	cmd      *exec.Cmd
	log      string
	done     chan struct{}

	mu    sync.Mutex
	usage Usage // as last read, kept once the process has ended
}

// Usage is what a process cost.
type Usage struct {
	PeakRSS    int64   // bytes: the high-water resident set (VmHWM)
	CPUSeconds float64 // user and system
}

// Start runs bin with args, its output appended to dir/name.log.
func Start(dir, name, bin string, args ...string) (*Process, error) {
	log := filepath.Join(dir, name+".log")
	out, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		_ = out.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{Name: name, dir: dir, bin: bin, args: args, cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = out.Close()
		close(p.done)
	}()
	return p, nil
}

// Again starts the program again as it was started, once this process has
// ended: a restart.
func (p *Process) Again() (*Process, error) {
	<-p.done
	return Start(p.dir, p.Name, p.bin, p.args...)
}

// Log is the path of the process's output.
func (p *Process) Log() string { return p.log }

// PID is the process's ID.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited returns an error once the process has ended.
func (p *Process) Exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited (%v); its log: %s", p.Name, p.cmd.ProcessState, p.log)
	default:
		return nil
	}
}

// Stop asks the process to end (SIGTERM) and kills it after grace.
func (p *Process) Stop(grace time.Duration) {
	p.Sample()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.Kill()
	}
}

// Kill kills the process at once, as a crash does, and waits for it.
func (p *Process) Kill() {
	p.Sample()
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Pause stops the process (SIGSTOP) until Resume: it holds what it has
// open and answers nothing.
func (p *Process) Pause() error { return p.cmd.Process.Signal(syscall.SIGSTOP) }

// Resume continues a paused process (SIGCONT).
func (p *Process) Resume() error { return p.cmd.Process.Signal(syscall.SIGCONT) }

// Sample reads the process's usage now, for Usage to report after the
// process has ended.
func (p *Process) Sample() {
	u, err := read(p.cmd.Process.Pid)
	if err != nil {
		return // ended: the last sample stands
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.usage.PeakRSS = max(p.usage.PeakRSS, u.PeakRSS)
	p.usage.CPUSeconds = max(p.usage.CPUSeconds, u.CPUSeconds)
}

// Usage is the process's usage as last sampled.
func (p *Process) Usage() Usage {
	p.Sample()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.usage
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

func read(pid int) (Usage, error) {
	var u Usage
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if kb, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(kb), " kB"), 10, 64)
			if err != nil {
				return u, err
			}
			u.PeakRSS = n << 10
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, err
	}
	// The command's name, in parentheses, may hold spaces: the fields
	// after its closing parenthesis are fixed.
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return u, errors.New("unreadable /proc stat")
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 13 {
		return u, errors.New("short /proc stat")
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return u, err
	}
	u.CPUSeconds = float64(utime+stime) / clockTicks
	return u, nil
}

// dieWithParent has the kernel kill cmd when the harness dies without
// stopping it (a kill, a panic): no part of a fleet outlives its run.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
