//go:build !linux

package kubetest

import "os/exec"

// dieWithParent does nothing where the kernel cannot: the test's cleanup
// stops the process.
func dieWithParent(*exec.Cmd) {}
