package main

import (
	"os/exec"
	"syscall"
)

// dieWithParent has cmd killed when this process dies, however it dies.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
