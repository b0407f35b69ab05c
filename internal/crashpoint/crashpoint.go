// Package crashpoint owns the named crash points of docs/design.md §6: places
// where the process kills itself with SIGKILL, as a power cut of the process
// would, when INKWELL_CRASH_AT names them. Unarmed, Hit is one atomic load.
//
// It imports only the standard library and nothing of Inkwell, so any
// package may call it.
package crashpoint

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// EnvVar names the environment variable that arms a crash point.
const EnvVar = "INKWELL_CRASH_AT"

// armed is the point named by INKWELL_CRASH_AT, parsed once at Arm. It is
// package state on purpose: a crash point must be reachable from any layer
// without threading a value through every constructor, exactly like a
// signal handler.
var armed atomic.Pointer[point]

type point struct {
	name string
	nth  int64
	hits atomic.Int64
}

// Parse checks a crash-point spec, "NAME" or "NAME:N", and returns the
// name and N (1 when absent).
func Parse(spec string) (name string, nth int64, err error) {
	name, nStr, hasN := strings.Cut(spec, ":")
	nth = 1
	if hasN {
		nth, err = strconv.ParseInt(nStr, 10, 64)
		if err != nil || nth < 1 {
			return "", 0, fmt.Errorf("crash point %q: N must be a whole number >= 1", spec)
		}
	}
	if !slices.Contains(Names, name) {
		return "", 0, fmt.Errorf("unknown crash point %q; known: %s", name, strings.Join(Names, ", "))
	}
	return name, nth, nil
}

// ArmFromEnv arms the point named by INKWELL_CRASH_AT, if any. It returns
// an error naming the known points when the variable is set to something
// unknown, so a typo is refused at start instead of silently never firing.
func ArmFromEnv() error {
	spec := os.Getenv(EnvVar)
	if spec == "" {
		armed.Store(nil)
		return nil
	}
	name, nth, err := Parse(spec)
	if err != nil {
		return fmt.Errorf("%s: %w", EnvVar, err)
	}
	armed.Store(&point{name: name, nth: nth})
	return nil
}

// Hit kills the process with SIGKILL if name is the armed point and this is
// its N-th hit. Nothing deferred runs and nothing is flushed.
func Hit(name string) {
	p := armed.Load()
	if p == nil || p.name != name {
		return
	}
	if p.hits.Add(1) != p.nth {
		return
	}
	fmt.Fprintf(os.Stderr, "crashpoint: %s hit %d: SIGKILL\n", name, p.nth)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // SIGKILL cannot be caught; never return into the caller
}
