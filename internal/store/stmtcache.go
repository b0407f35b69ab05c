package store

import (
	"context"
	"database/sql"
	"strings"
	"sync"
)

// rebindKept is the dialect's rebind for a statement the store keeps
// prepared and runs again and again (txExec, txQuery, txQueryRow).
func (s *Store) rebindKept(query string) string {
	if s.dialect.rebindKept != nil {
		return s.dialect.rebindKept(query)
	}
	return s.dialect.rebind(query)
}

// planOnce is SQLite's rebind for kept statements: each parameter $N is
// written +?N, a no-op on any value, so that SQLite plans the statement
// once instead of again whenever a value its planner looked at (a LIMIT,
// a STAT4-sampled column) is bound anew. Why, and what it changes:
// docs/architecture.md, "Statements SQLite plans once".
func planOnce(query string) string { return strings.ReplaceAll(query, "$", "+?") }

// stmtCache keeps one prepared statement per query text on the write pool,
// so the hot transitions skip SQLite's parse and plan on every call. tx.StmtContext reuses the statement
// already prepared on the transaction's connection.
//
// A statement cannot be prepared on the pool while a transaction holds
// SQLite's only write connection, so a miss runs unprepared inside the
// transaction and is prepared after it ends (warm).
type stmtCache struct {
	mu      sync.Mutex
	stmts   map[string]*sql.Stmt
	pending map[string]bool
}

// lookup returns the cached statement for query, or nil after noting the
// miss for the next warm.
func (c *stmtCache) lookup(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.stmts[query]; ok {
		return st
	}
	if c.pending == nil {
		c.pending = map[string]bool{}
	}
	c.pending[query] = true
	return nil
}

// warm prepares the statements that missed, outside any transaction.
func (c *stmtCache) warm(ctx context.Context, db *sql.DB) {
	c.mu.Lock()
	var todo []string
	for q := range c.pending {
		todo = append(todo, q)
	}
	c.pending = nil
	c.mu.Unlock()
	for _, q := range todo {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			continue // stays unprepared; it is tried again on its next miss
		}
		c.mu.Lock()
		if c.stmts == nil {
			c.stmts = map[string]*sql.Stmt{}
		}
		if _, dup := c.stmts[q]; dup {
			st.Close()
		} else {
			c.stmts[q] = st
		}
		c.mu.Unlock()
	}
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.stmts {
		st.Close()
	}
	c.stmts = nil
}
