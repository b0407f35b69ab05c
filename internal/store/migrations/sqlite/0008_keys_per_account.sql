-- Idempotency keys unique per account, and audit_log (DESIGN.md §10).
--
--   * jobs.account: the account that pays for the job, as decided at
--     accept (api.decideAccount), copied here from each stored job's
--     payload ('default' where the payload names none, or is not JSON).
--     The unique key becomes (account, idempotency_key): the same key
--     under two accounts is two jobs; a re-send is looked up by both.
--   * SQLite cannot drop a column's UNIQUE constraint, so jobs is built
--     again, the way prune rewrites rows: copied aside into a temporary
--     table, dropped, created anew with the same columns in the same order
--     plus account, and filled from the copy (ids kept: id is the rowid).
--     No table is renamed, so every foreign key (job_attempts, results,
--     charges), view and trigger body that names "jobs" names the new
--     table. Foreign keys are deferred to the commit, when every parent row
--     is back. The store replays every index and trigger jobs had, word for
--     word, after this file (migrate_hooks.go). Triggers fire neither for
--     the drop nor for the refill (the new table has none yet), so
--     job_counts stays as it was.
--   * audit_log: one row per operator action (retry, cancel, prune) on a
--     job, written in the action's own transaction: who (actor: 'token
--     <id>', 'cli', 'api' for an anonymous request on loopback,
--     'retention' for serve's own retention loop), what, which job, when.
--     Append-only: rows are never updated or deleted. job_id has no
--     foreign key: jobs rows are never deleted, and prune rewrites each
--     pruned job row (delete and insert again, see prune.go), where a
--     foreign key would add two more index probes per job.

PRAGMA defer_foreign_keys = ON; -- this transaction only: SQLite clears it at COMMIT or ROLLBACK
CREATE TEMP TABLE jobs_before_0008 AS SELECT * FROM jobs;
DROP TABLE jobs;

CREATE TABLE jobs (
    id              INTEGER PRIMARY KEY,
    idempotency_key TEXT NOT NULL,
    request_hash    TEXT NOT NULL,
    payload         TEXT NOT NULL,            -- the normalized request as JSON
    status          TEXT NOT NULL CHECK (status IN ('queued', 'running', 'failed', 'done')),
    error           TEXT,
    lane            TEXT,                     -- lane that ran it last; NULL for legacy rows
    created_at      TEXT,                     -- NULL only where a legacy row had none
    started_at      TEXT,
    finished_at     TEXT,
    queued_at       TEXT,
    error_class     TEXT CHECK (error_class IN (
        'not_sent', 'rate_limited', 'provider_error', 'rejected', 'malformed', 'unstorable',
        'timeout', 'worker_restarted', 'shutdown', 'cancelled', 'legacy')),
    not_before      TEXT,
    gave_up_after   INTEGER,
    pruned_at       TEXT,
    account         TEXT NOT NULL DEFAULT 'default', -- who pays; keys are unique per account
    UNIQUE (account, idempotency_key)
);

INSERT INTO jobs (id, idempotency_key, request_hash, payload, status, error, lane, created_at, started_at, finished_at,
                  queued_at, error_class, not_before, gave_up_after, pruned_at, account)
SELECT id, idempotency_key, request_hash, payload, status, error, lane, created_at, started_at, finished_at,
       queued_at, error_class, not_before, gave_up_after, pruned_at,
       CASE WHEN json_valid(payload) AND json_type(payload, '$.account') = 'text' AND json_extract(payload, '$.account') <> ''
            THEN json_extract(payload, '$.account') ELSE 'default' END
FROM temp.jobs_before_0008
ORDER BY id;

DROP TABLE temp.jobs_before_0008;

CREATE TABLE audit_log (
    id      INTEGER PRIMARY KEY,
    at      TEXT NOT NULL,
    actor   TEXT NOT NULL,                    -- 'token <id>', 'cli', 'api', 'retention'
    action  TEXT NOT NULL CHECK (action IN ('retry', 'cancel', 'prune')),
    job_id  INTEGER NOT NULL,                 -- jobs.id (no foreign key: see the top)
    detail  TEXT                              -- what the job was before, in words
);
CREATE INDEX audit_log_job ON audit_log (job_id, id);

CREATE TRIGGER audit_log_no_update
BEFORE UPDATE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'audit_log: rows never change');
END;
CREATE TRIGGER audit_log_no_delete
BEFORE DELETE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'audit_log: rows are never deleted');
END;
