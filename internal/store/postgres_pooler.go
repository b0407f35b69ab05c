package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/inkwell/inkwell"
)

// The lane lock refuses a connection pooler in transaction mode, which
// would keep the lock in a server session this process does not own.

// refusePooler makes sure the lock lives in a server session that belongs
// to this connection alone. A pooler in transaction mode (PgBouncer's
// pool_mode=transaction) hands the server session to whichever client
// transaction comes next: the lock would stay in a session this process
// does not own, proving nothing, and its keeper would check someone else's.
//
// Two looks: the lock session must keep its backend pid from statement to
// statement, and a second connection that opens a transaction must get a
// different backend (in transaction mode it gets the idle one that holds
// our lock). The keeper keeps checking the pid for the life of the lock,
// so a pooler that hid during these looks is caught as soon as it hands
// our session elsewhere.
func (s *Store) refusePooler(ctx context.Context, p *pgLock) error {
	var again, other int
	if err := p.conn.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&again); err != nil {
		return s.classify(fmt.Errorf("lane %s: check lock session: %w", p.lane, err))
	}
	db, conn, err := s.openSession(ctx, "inkwell/probe")
	if err != nil {
		return fmt.Errorf("lane %s: check lock session: %w", p.lane, err)
	}
	defer db.Close()
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return s.classify(fmt.Errorf("lane %s: check lock session: %w", p.lane, err))
	}
	defer tx.Rollback()
	if err := tx.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&other); err != nil {
		return s.classify(fmt.Errorf("lane %s: check lock session: %w", p.lane, err))
	}
	held, err := p.held(ctx)
	if err != nil {
		return fmt.Errorf("lane %s: check lock session: %w", p.lane, err)
	}
	if again != p.backendPID || other == p.backendPID || !held {
		s.releaseStray(ctx, p, tx)
		return inkwell.Errorf(inkwell.EINVALID, "lane %s: the advisory lock is not in a server session of its own "+
			"(lock taken by backend %d; the lock session then ran on backend %d; another connection's transaction got backend %d). "+
			"A connection pooler in transaction mode breaks session locks: point --db at PostgreSQL directly, or at a pool in session mode",
			p.lane, p.backendPID, again, other)
	}
	return nil
}

// releaseStray lets go of a lock left in a pooled server session, which
// closing our connection would not end. The unlock must run on the backend
// that holds it: the probe's transaction has it pinned when the pooler gave
// it that one, else the lock session may reach it. Should the lock still be
// there, that backend is terminated: it holds this lane's lock for no live
// holder, and the lane could never start again while the pooler kept it.
func (s *Store) releaseStray(ctx context.Context, p *pgLock, probe *sql.Tx) {
	const unlock = `SELECT pg_advisory_unlock($1, $2) FROM (SELECT 1) one WHERE pg_backend_pid() = $3`
	_, _ = probe.ExecContext(ctx, unlock, laneLockNS, p.key, p.backendPID)
	_, _ = p.conn.ExecContext(ctx, unlock, laneLockNS, p.key, p.backendPID)
	const terminate = `SELECT pg_terminate_backend(pid) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND objsubid = 2 AND pid = $3
		  AND classid = ($1::int8 & 4294967295)::oid AND objid = ($2::int8 & 4294967295)::oid`
	if _, err := s.db.ExecContext(ctx, terminate, laneLockNS, p.key, p.backendPID); err != nil {
		s.log.WarnContext(ctx, "pooled session may still hold the lane lock", "lane", p.lane, "backend_pid", p.backendPID, "err", err)
	}
}
