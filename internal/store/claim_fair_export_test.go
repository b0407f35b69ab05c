package store

import "database/sql"

// ClaimSQL is the statement ClaimUpTo runs to pick and claim jobs on s's
// dialect, in the dialect's placeholders: $1 lane, $2 now, $3 n; fenced
// by l's lock when l is not nil. Tests EXPLAIN it.
func ClaimSQL(s *Store, l *LaneLock) string {
	fence := ""
	if l != nil {
		fence, _ = s.lockFence(l)
	}
	if s.dialect.claimStatement {
		return s.claimStatementSQL(fence)
	}
	return s.dialect.rebind(s.claimTxSQL(fence))
}

// ClaimDB is the pool the claim statement runs on: its own on PostgreSQL
// (postgres_claim.go), the write pool on SQLite. Tests EXPLAIN the claim
// on it, to see the plan the claim gets.
func ClaimDB(s *Store) *sql.DB {
	if s.cdb != nil {
		return s.cdb
	}
	return s.db
}

// TurnSQL is "SELECT" the turn a job of account $1 enters the queue with
// (claim_fair.go's turnFor), in the dialect's placeholders.
// Tests EXPLAIN it.
func TurnSQL(s *Store) string {
	return s.dialect.rebind(`SELECT ` + turnFor("$1"))
}
