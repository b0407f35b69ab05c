package store

import (
	"bytes"
	"fmt"
	"os"
	"strings"
)

// readBootID is the kernel's random boot id, new at every boot.
func readBootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// readProcStat reads a process's start time (clock ticks since boot, field
// 22 of /proc/PID/stat) and run state (field 3). A missing process is an
// os.IsNotExist error.
func readProcStat(pid int) (start string, state byte, err error) {
	if pid <= 0 {
		return "", 0, os.ErrNotExist
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0, err
	}
	// The command name (field 2) is in parentheses and may itself hold
	// spaces and parentheses: the fields after it start past the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", 0, fmt.Errorf("/proc/%d/stat: unreadable", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 || len(f[0]) != 1 {
		return "", 0, fmt.Errorf("/proc/%d/stat: unreadable", pid)
	}
	return f[19], f[0][0], nil
}
