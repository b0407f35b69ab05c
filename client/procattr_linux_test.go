package client_test

import "syscall"

// childAttr makes a child die with the test binary.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
