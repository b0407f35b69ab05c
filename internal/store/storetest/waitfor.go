package storetest

import (
	"testing"
	"time"
)

// WaitInterval is how often WaitFor polls its condition: short enough that
// a test sees a change within milliseconds, long enough not to hammer the
// database it usually reads.
const WaitInterval = 10 * time.Millisecond

// WaitFor polls cond every WaitInterval until it holds, and fails the test
// with "still waiting for <what>" once timeout has passed. It is the one
// way tests wait for a row, a process or a lane to reach a state: never a
// sleep. cond runs on the test's goroutine, so it may call t.Fatal.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(WaitInterval)
	defer tick.Stop()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("still waiting for %s after %v", what, timeout)
		}
	}
}
