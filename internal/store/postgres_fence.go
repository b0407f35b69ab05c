package store

import "fmt"

// The lane lock's fence (PostgreSQL): the guard that makes a write commit
// only while, in the same statement, pg_locks shows the lane's advisory
// lock held by this process's lock session (postgres_lock.go).

// claimFence is Claim's guard while this process holds lane's lock on
// PostgreSQL: the claim commits nothing unless, in the same statement,
// pg_locks shows the lock still held by this process's lock session. The
// keeper notices a lost lock within lockCheckEvery; this closes that
// window, so a lane whose lock session has ended cannot claim even once.
// It costs no round trip. Keys and pid are integers written into the text.
func (s *Store) claimFence(lane string) string {
	v, ok := s.fences.Load(lane)
	if !ok {
		return ""
	}
	p := v.(*pgLock)
	return fmt.Sprintf(`
		  AND EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2
		    AND classid = %d::oid AND objid = %d::oid AND pid = %d)`, uint32(laneLockNS), uint32(p.key), p.backendPID)
}
