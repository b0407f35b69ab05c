package store

import (
	"fmt"
	"os"
	"sync"
)

// A flock on a file that can be unlinked is not proof of death by itself:
// delete or replace the lock file under a live holder and a second process
// "takes" the lane. So a lane's lock is proof only together with a second,
// independent fact: the previous holder's process is gone. On the same
// host that is checked through the process table: the holder's pid is
// absent, or names another process (its start time differs), or the host
// has rebooted since (its boot id differs). The lanes row and the lock
// file carry that identity (Holder.BootID, Holder.ProcStart).

// liveness is what this host can tell about a holder's process.
type liveness struct {
	Known bool   // false: it cannot be checked from here (another host, no identity recorded)
	Alive bool   // meaningful when Known
	State string // when alive: the kernel's run state in words, e.g. "stopped (T)"
	Self  bool   // the holder is this very process (which let go of its hold: Known, not Alive)
	Why   string // the evidence, in words, for recovery_runs and refusals
}

var (
	selfOnce              sync.Once
	selfBoot, selfStart   string
	processStateNameTable = map[byte]string{
		'R': "running (R)", 'S': "sleeping (S)", 'D': "in uninterruptible wait (D)",
		'T': "stopped (T)", 't': "stopped by a tracer (t)", 'Z': "a zombie (Z)", 'X': "dead (X)",
		'I': "idle (I)", 'P': "parked (P)", 'W': "paging (W)",
	}
)

// selfIdentity is this process's boot id and start time ("" where the
// platform cannot tell).
func selfIdentity() (bootID, start string) {
	selfOnce.Do(func() {
		selfBoot = readBootID()
		selfStart, _, _ = readProcStat(os.Getpid())
	})
	return selfBoot, selfStart
}

// newHolder names this process as a lane's holder.
func newHolder() Holder {
	boot, start := selfIdentity()
	return Holder{PID: os.Getpid(), Host: hostname(), Incarnation: newIncarnation(), BootID: boot, ProcStart: start}
}

// checkHolder tells whether the process h names still runs, as far as this
// host can see.
func checkHolder(h Holder) liveness {
	who := fmt.Sprintf("pid %d on host %s", h.PID, h.Host)
	if h.Host != hostname() {
		return liveness{Why: who + ": another host, so its process cannot be checked from here"}
	}
	boot, start := selfIdentity()
	if h.BootID != "" && boot != "" && h.BootID != boot {
		return liveness{Known: true, Why: who + ": gone (this host has rebooted since: its boot id differs)"}
	}
	if h.PID == os.Getpid() && h.ProcStart != "" && h.ProcStart == start {
		// An earlier incarnation in this very process, which released its
		// lock: the flock just granted to this process proves it.
		return liveness{Known: true, Self: true, Why: who + ": this process itself, which released its earlier hold"}
	}
	pstart, state, err := readProcStat(h.PID)
	switch {
	case os.IsNotExist(err):
		return liveness{Known: true, Why: who + ": gone (no such process)"}
	case err != nil:
		return liveness{Why: fmt.Sprintf("%s: cannot be checked (%v)", who, err)}
	case state == 'Z' || state == 'X':
		// Whatever process the pid names, it has exited and only waits
		// for its parent to collect it. Its files (so its flocks) and
		// sockets (so its PostgreSQL sessions) are closed once its last
		// thread is done; for the moment a dying thread group's leader
		// shows Z before the others end, the lock itself is still held,
		// and the lane is refused on that, never on this.
		return liveness{Known: true, Why: fmt.Sprintf("%s: gone (%s: it has exited and holds nothing; its parent has not reaped it yet)", who, stateName(state))}
	case h.ProcStart != "" && pstart != "" && pstart != h.ProcStart:
		return liveness{Known: true, Why: who + ": gone (that pid now names another process: its start time differs)"}
	case h.ProcStart == "" || h.BootID == "":
		// Recorded by an older Inkwell, without its process identity: a
		// live pid may be a reused one, so it proves nothing either way.
		return liveness{Why: who + ": the record has no process start time, so a live pid there proves nothing"}
	}
	return liveness{Known: true, Alive: true, State: stateName(state), Why: fmt.Sprintf("%s: alive, %s", who, stateName(state))}
}

func stateName(s byte) string {
	if n, ok := processStateNameTable[s]; ok {
		return n
	}
	if s == 0 {
		return "state unknown"
	}
	return fmt.Sprintf("state %c", s)
}
