package drill

import "syscall"

// procAttr puts a child in its own process group (a Ctrl-C in the drill's
// terminal reaches the drill, which then stops its children in order) and
// has the kernel SIGKILL it if the drill itself dies.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
