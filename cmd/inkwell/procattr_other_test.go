//go:build !linux

package main

import "syscall"

// ChildProcAttr: only Linux has a parent-death signal; elsewhere a child
// is killed by the test's cleanup alone.
func ChildProcAttr() *syscall.SysProcAttr { return nil }
