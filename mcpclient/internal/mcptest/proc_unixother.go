//go:build unix && !linux

package mcptest

import "syscall"

// dieWithParent does nothing where there is no parent-death signal.
func dieWithParent(*syscall.SysProcAttr) {}

// zombie cannot tell a zombie from a live process here.
func zombie(int) bool { return false }
