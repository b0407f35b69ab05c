//go:build !linux

package drill

import "syscall"

// procAttr puts a child in its own process group, so a Ctrl-C in the
// drill's terminal reaches the drill, which then stops its children.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
