//go:build !linux

package client_test

import "syscall"

func childAttr() *syscall.SysProcAttr { return nil }
