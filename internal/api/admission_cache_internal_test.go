package api

import (
	"fmt"
	"testing"
	"time"
)

// TestAccountLimits_CacheIsBounded: without tokens a body may name any
// account; each name sent was kept in the rpm cache for the life of the
// process. The cache sweeps what is stale once it is full, and empties
// when nothing is.
func TestAccountLimits_CacheIsBounded(t *testing.T) {
	t.Parallel()
	l := newAccountLimits(time.Minute)
	now := time.Now()
	for i := range maxCachedRPMs {
		at := now
		if i%2 == 0 {
			at = now.Add(-2 * time.Minute) // stale
		}
		l.rpms[fmt.Sprint("acct-", i)] = cachedRPM{rpm: 1, at: at}
	}
	l.sweep(now)
	if got := len(l.rpms); got != maxCachedRPMs/2 {
		t.Fatalf("after a sweep of a full cache, half of it stale: %d entries, want %d (the fresh ones)", got, maxCachedRPMs/2)
	}
	for i := range maxCachedRPMs {
		l.rpms[fmt.Sprint("fresh-", i)] = cachedRPM{rpm: 1, at: now}
	}
	l.sweep(now)
	if got := len(l.rpms); got != 0 {
		t.Errorf("after a sweep of a cache full of fresh entries: %d entries, want 0 (it is a cache)", got)
	}
}
