//go:build !linux

package main

import "os/exec"

// dieWithParent does nothing here: only Linux kills a child with its parent.
func dieWithParent(*exec.Cmd) {}
