//go:build linux

package store

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// SQLiteWriteLockHolder names the process that holds the write lock of
// the SQLite database at path, for an error that would otherwise only say
// "busy": "pid 4121 (python3), stopped (T)". In WAL mode the write lock
// is a POSIX lock on byte 120 of <path>-shm (SQLite's WAL_WRITE_LOCK);
// Linux lists every such lock, with its holder's pid, in /proc/locks. ""
// when it cannot tell (another platform, no such lock, the holder is this
// process, the file system does not show it).
func SQLiteWriteLockHolder(path string) string {
	canon, err := CanonicalPath(path)
	if err != nil {
		return ""
	}
	fi, err := os.Stat(canon + "-shm")
	if err != nil {
		return ""
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	f, err := os.Open("/proc/locks")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pid, ok := writeLockOn(sc.Text(), uint64(st.Ino), 120) // SQLite's WAL_WRITE_LOCK
		if !ok || pid == os.Getpid() {
			continue
		}
		return describePID(pid)
	}
	return ""
}

// writeLockOn reads one line of /proc/locks ("1: POSIX ADVISORY WRITE
// 4121 fe:00:10158314 120 120") and returns its holder when it is a write
// lock on inode ino covering byte off.
func writeLockOn(line string, ino uint64, off int64) (int, bool) {
	f := strings.Fields(line)
	if len(f) < 8 || f[1] != "POSIX" && f[1] != "OFDLCK" || f[3] != "WRITE" {
		return 0, false
	}
	dev := strings.Split(f[5], ":")
	if len(dev) != 3 {
		return 0, false
	}
	n, err := strconv.ParseUint(dev[2], 10, 64)
	if err != nil || n != ino {
		return 0, false
	}
	start, err1 := strconv.ParseInt(f[6], 10, 64)
	end := int64(1) << 62 // "EOF": to the end of the file
	if f[7] != "EOF" {
		var err2 error
		if end, err2 = strconv.ParseInt(f[7], 10, 64); err2 != nil {
			return 0, false
		}
	}
	pid, err3 := strconv.Atoi(f[4])
	if err1 != nil || err3 != nil || off < start || off > end || pid <= 0 {
		return 0, false
	}
	return pid, true
}

// describePID is "pid N (command), state" as far as this host can tell.
func describePID(pid int) string {
	comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	s := fmt.Sprintf("pid %d", pid)
	if c := strings.TrimSpace(string(comm)); c != "" {
		s += " (" + c + ")"
	}
	if _, state, err := readProcStat(pid); err == nil && state != 0 {
		s += ", " + stateName(state)
	}
	return s
}
