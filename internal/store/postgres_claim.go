package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// The claim's own connections on PostgreSQL.
//
// The claim (claimStatementSQL) is meant to read the queue through one
// ordered index scan of jobs_queued_turn that stops at its n-th ready
// job, and to find the rows it updates by primary key. On the shared pool
// two things went wrong for the walk across accounts that the claim by
// turns replaced, and either would as well for an ordered scan under a
// LIMIT; EXPLAIN ANALYZE (auto_explain over BenchmarkClaim) showed both:
//
//   - planning: PostgreSQL kept a custom plan for the prepared statement
//     and re-planned it on every claim, 1.4–2.6 ms each, more than the
//     claim's execution;
//   - bitmap scans: with row estimates stale after a burst of accepts
//     (as they are until autovacuum analyzes), the planner read a queue
//     index through a bitmap scan of every entry its condition matched,
//     then sorted.
//
// So the claim runs on connections of its own, set for this one
// statement: a generic plan, built once per connection and kept
// (plan_cache_mode = force_generic_plan); no bitmap scan, no sequential
// scan where an index serves (enable_bitmapscan, enable_seqscan = off: an
// ordered read of the right index is always the plan wanted here,
// whatever the statistics say). Nothing else runs on these connections,
// so no other statement's plan is touched.
// TestStore_ClaimFair/PlanReadsTheIndexAt100k checks the generic plan
// these settings give. Figures: docs/benchmarks.md.
const claimSessionSettings = `SET plan_cache_mode = force_generic_plan; SET enable_bitmapscan = off; SET enable_seqscan = off`

// claimPoolSize bounds the claim's connections: one per lane claiming at
// the same moment; a lane claims from one goroutine.
const claimPoolSize = 4

// openClaimPool opens the claim's pool (not yet connected) for dsn.
func openClaimPool(dsn string) (*sql.DB, error) {
	cfg, err := postgresConfig(dsn, "inkwell/claim")
	if err != nil {
		return nil, err
	}
	cfg.AfterConnect = func(ctx context.Context, c *pgconn.PgConn) error {
		if err := jitOff(ctx, c); err != nil {
			return err
		}
		return claimSession(ctx, c)
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(claimPoolSize)
	db.SetMaxIdleConns(claimPoolSize)
	db.SetConnMaxIdleTime(5 * time.Minute)
	return db, nil
}

// claimSession applies claimSessionSettings to one claim connection. A
// server that lacks one of them (plan_cache_mode came in PostgreSQL 12)
// runs the claim with its defaults: slower, the same result.
func claimSession(ctx context.Context, c *pgconn.PgConn) error {
	err := c.Exec(ctx, claimSessionSettings).Close()
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42704" { // undefined_object
		return nil
	}
	if err != nil {
		return fmt.Errorf("set up a claim connection: %w", err)
	}
	return nil
}
