//go:build !linux

package proctest

import "os/exec"

// dieWithParent does nothing where the kernel cannot: the test's cleanup
// stops the process.
func dieWithParent(*exec.Cmd) {}
