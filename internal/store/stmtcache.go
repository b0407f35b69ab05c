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
// written +?N, so that no value bound to it ever makes SQLite plan the
// statement again.
//
// SQLite re-plans a prepared statement at its next step when a parameter
// whose value the planner looked at is bound anew: one in a LIMIT (SQLite
// 3.54 reads "LIMIT ?" for its row estimate), one compared with an indexed
// column once ANALYZE has stored STAT4 samples (PRAGMA optimize at open
// does, see optimizeSQLite), one matched against a partial index's WHERE.
// The driver unbinds every text parameter after each run, and a claim's
// LIMIT (the lane's free slots) changes from claim to claim, so the fair
// claim's statement, the store's largest, was parsed and planned again on
// nearly every claim: 17% of a busy lane's CPU (docs/benchmarks.md, "Many
// calls per lane"). A unary plus is a no-op on every value and gives no
// affinity, as a bare parameter has none, so the statement means the same;
// but the planner sees an expression, not a parameter, and plans it once,
// with the estimates it uses for a value it does not know. That is
// SQLite's query planner stability guarantee (SQLITE_DBCONFIG_ENABLE_QPSG),
// which the driver gives no way to switch on. Index use is unchanged: a
// plus on the value side of a comparison is not the plus on a column that
// turns an index off. Reads that run once (the read pool) keep plain
// parameters and so plans made for their values.
func planOnce(query string) string { return strings.ReplaceAll(query, "$", "+?") }

// stmtCache keeps one prepared statement per query text on the write pool,
// so the hot transitions skip SQLite's parse and plan on every call (a
// fifth of the lane's CPU without it). tx.StmtContext reuses the statement
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
