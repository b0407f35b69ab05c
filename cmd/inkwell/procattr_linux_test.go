package main

import "syscall"

// ChildProcAttr is what every inkwell child a test starts runs with: the
// kernel kills it with SIGKILL when the test binary dies (a -timeout panic,
// a crash), so no `inkwell serve` outlives the test that started it.
// Exported for lanes_test.go, which is in package main_test.
func ChildProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
