package store

// ClaimSQL is the statement ClaimUpTo runs to pick and claim jobs on s's
// dialect, unfenced, in the dialect's placeholders: $1 lane, $2 now, $3 n,
// $4 the lane's cursor. Tests EXPLAIN it.
func ClaimSQL(s *Store) string {
	if s.dialect.claimStatement {
		return s.claimStatementSQL("")
	}
	return s.dialect.rebind(s.claimTxSQL(""))
}
