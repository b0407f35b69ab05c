package store

import (
	"database/sql"
	"maps"
)

// PreparedStmts is what the prepared-statement cache holds now: each
// prepared statement by its query text, as the store runs it.
func PreparedStmts(s *Store) map[string]*sql.Stmt {
	s.stmts.mu.Lock()
	defer s.stmts.mu.Unlock()
	return maps.Clone(s.stmts.stmts)
}
