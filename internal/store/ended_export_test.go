package store

import "time"

// SetEndedRecheck sets how often s's job-end watch reads the waited-for
// jobs (PostgreSQL), before WatchEnded starts.
func SetEndedRecheck(s *Store, every time.Duration) { s.endedRecheck = every }
