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

// claimSessionSettings are the claim's own connections' settings on
// PostgreSQL: a generic plan built once and kept, no bitmap or sequential
// scan, so the claim is always the ordered read of jobs_queued_turn and
// is not planned again on every claim (docs/scaling.md, "Fair claims").
// TestStore_ClaimFair/PlanReadsTheIndexAt100k checks the plan they give.
const claimSessionSettings = `SET plan_cache_mode = force_generic_plan; SET enable_bitmapscan = off; SET enable_seqscan = off`

// claimPoolSize bounds the claim's connections: one per lane claiming at
// the same moment; a lane claims from one goroutine.
const claimPoolSize = 4

// openClaimPool opens the claim's pool (not yet connected) for dsn.
func openClaimPool(dsn string) (*sql.DB, error) {
	return openSessionPool(dsn, "inkwell/claim", claimPoolSize, claimSession)
}

// groupSessionSettings are the group pool's settings (openGroupPool): a
// generic plan built once and kept, with no sequential or bitmap scan in
// it. A connection builds its plan of a statement at the statement's first
// run, usually on nearly empty tables, where a scan of the whole table (or
// of a whole partial index, bitmap) costs least, and keeps it as the
// tables grow: the completion found its attempts that way, reading every
// running attempt's index entry and those of every attempt finished since
// the last vacuum. TestStore_GroupPlansFindRowsByKey checks the plans.
const groupSessionSettings = `SET plan_cache_mode = force_generic_plan; SET enable_seqscan = off; SET enable_bitmapscan = off`

// groupPoolSize bounds the connections of the group statements' pool: an
// accept group and an outcome group at a time (one of each batcher).
const groupPoolSize = 2

// openGroupPool opens the pool that accept and outcome groups write on
// (PostgreSQL): each connection keeps a generic plan of a statement once
// built. The group statements take their members as arrays, and with a
// custom plan PostgreSQL planned each anew on every run: a third of a lone
// accept's time (groupSessionSettings).
func openGroupPool(dsn string) (*sql.DB, error) {
	return openSessionPool(dsn, "inkwell", groupPoolSize, func(ctx context.Context, c *pgconn.PgConn) error {
		err := c.Exec(ctx, groupSessionSettings).Close()
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "42704" { // before PostgreSQL 12: planned each time, the same result
			return nil
		}
		return err
	})
}

// openSessionPool opens a pool of its own (not yet connected) of at most
// size connections named app, each set up by JIT off, then setup.
func openSessionPool(dsn, app string, size int, setup func(ctx context.Context, c *pgconn.PgConn) error) (*sql.DB, error) {
	cfg, err := postgresConfig(dsn, app)
	if err != nil {
		return nil, err
	}
	cfg.AfterConnect = func(ctx context.Context, c *pgconn.PgConn) error {
		if err := jitOff(ctx, c); err != nil {
			return err
		}
		return setup(ctx, c)
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(size)
	db.SetMaxIdleConns(size)
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
