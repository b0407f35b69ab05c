//go:build !linux

package store

import (
	"errors"
	"os"
	"syscall"
)

// readBootID is unknown off Linux: the process check then rests on the
// pid alone.
func readBootID() string { return "" }

// readProcStat off Linux knows only whether the pid exists (signal 0). No
// start time is recorded there, so checkHolder can prove a holder gone
// only by its absence; otherwise the flock alone is the evidence.
func readProcStat(pid int) (start string, state byte, err error) {
	if pid <= 0 {
		return "", 0, os.ErrNotExist
	}
	err = syscall.Kill(pid, 0)
	if errors.Is(err, syscall.ESRCH) {
		return "", 0, os.ErrNotExist
	}
	return "", 0, nil
}
