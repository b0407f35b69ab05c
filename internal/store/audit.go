package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// audit_log (migration 0008, docs/design.md §10): who retried, cancelled or
// pruned which job, and when. Each row is written by the transition itself
// (RetryIfFailed, Cancel, Prune), in the transaction that makes the change,
// so there is never an action without its row nor a row without its
// action. Rows are never updated or deleted (triggers refuse it). This
// file holds the one insert and the read.

// Who acted, as audit_log.actor holds it (and as a cancel's error says).
const (
	// ActorCLI is a local command with access to the database (inkwell
	// retry, cancel, prune).
	ActorCLI = "cli"
	// ActorAPI is an HTTP request without a token, when tokens are not
	// in force (no token exists yet, or --auth off; loopback only).
	ActorAPI = "api"
	// ActorRetention is serve's own retention loop (serve --retention).
	ActorRetention = "retention"
	// ActorUnnamed is written when a caller named no one: every caller in
	// Inkwell names itself, so this marks a caller that should.
	ActorUnnamed = "unnamed"
)

// ActorToken is the actor for a request made with an API token: its id,
// never its secret.
func ActorToken(id string) string { return "token " + id }

// Audit actions.
const (
	AuditRetry  = "retry"
	AuditCancel = "cancel"
	AuditPrune  = "prune"
)

// AuditEntry is one row of audit_log.
type AuditEntry struct {
	ID     int64     `json:"id"`
	At     time.Time `json:"at"`
	Actor  string    `json:"actor"`
	Action string    `json:"action"`
	JobID  int64     `json:"job_id"`
	Detail string    `json:"detail,omitempty"`
}

// auditTx writes one audit row inside the action's transaction.
func (s *Store) auditTx(ctx context.Context, tx *sql.Tx, at any, actor, action string, jobID int64, detail string) error {
	const insert = `INSERT INTO audit_log (at, actor, action, job_id, detail) VALUES ($1, $2, $3, $4, $5)`
	if _, err := s.txExec(ctx, tx, insert, at, named(actor), action, jobID, detail); err != nil {
		return fmt.Errorf("audit %s of job %d: %w", action, jobID, err)
	}
	return nil
}

// auditPruneTx writes one audit row per job of a prune batch, in one
// statement. Its detail is left empty: the job says what it was (done or
// failed, pruned_at), and one batch's rows share the cut-off; a short row
// keeps retention's own history small (about 60 bytes a job).
func (s *Store) auditPruneTx(ctx context.Context, tx *sql.Tx, at any, actor, ids string) error {
	insert := `INSERT INTO audit_log (at, actor, action, job_id) SELECT $1, $2, 'prune', id FROM jobs WHERE id IN (` + ids + `)`
	if _, err := s.txExec(ctx, tx, insert, at, named(actor)); err != nil {
		return fmt.Errorf("audit prune: %w", err)
	}
	return nil
}

// AuditLog returns audit rows, newest first: of one job when jobID > 0,
// else of every job; at most limit (all when limit <= 0).
func (s *Store) AuditLog(ctx context.Context, jobID int64, limit int) ([]AuditEntry, error) {
	q := `SELECT id, at, actor, action, job_id, COALESCE(detail, '') FROM audit_log`
	args := []any{}
	if jobID > 0 {
		q += ` WHERE job_id = $1`
		args = append(args, jobID)
	}
	q += ` ORDER BY id DESC`
	if limit > 0 {
		q += fmt.Sprintf(` LIMIT %d`, limit)
	}
	rows, err := s.rdb.QueryContext(ctx, s.dialect.rebind(q), args...)
	if err != nil {
		return nil, s.classify(fmt.Errorf("read audit_log: %w", err))
	}
	defer rows.Close()
	var out []AuditEntry
	for rows.Next() {
		var e AuditEntry
		var at nullTime
		if err := rows.Scan(&e.ID, &at, &e.Actor, &e.Action, &e.JobID, &e.Detail); err != nil {
			return nil, fmt.Errorf("read audit_log: %w", err)
		}
		e.At = at.Time
		out = append(out, e)
	}
	return out, rows.Err()
}

func named(actor string) string {
	if actor == "" {
		return ActorUnnamed
	}
	return actor
}
