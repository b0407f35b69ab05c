-- Inkwell schema, SQLite dialect. Times are TEXT in UTC,
-- 'YYYY-MM-DDTHH:MM:SS.ffffffZ' (text order is time order); rows adopted
-- from the legacy single-table Inkwell keep 'YYYY-MM-DD HH:MM:SS'.

CREATE TABLE jobs (
    id              INTEGER PRIMARY KEY,
    idempotency_key TEXT NOT NULL UNIQUE,
    request_hash    TEXT NOT NULL,
    payload         TEXT NOT NULL,            -- the normalized request as JSON
    status          TEXT NOT NULL CHECK (status IN ('queued', 'running', 'failed', 'done')),
    error           TEXT,
    lane            TEXT,                     -- lane that ran it last; NULL for legacy rows
    created_at      TEXT,                     -- NULL only where a legacy row had none
    started_at      TEXT,
    finished_at     TEXT
);
-- Claim reads only queued rows, recovery only running rows: neither ever
-- scans finished history.
CREATE INDEX jobs_queued ON jobs (id) WHERE status = 'queued';
CREATE INDEX jobs_running ON jobs (lane) WHERE status = 'running';
CREATE INDEX jobs_failed ON jobs (id) WHERE status = 'failed';

CREATE TABLE lanes (
    name         TEXT PRIMARY KEY,
    incarnation  TEXT NOT NULL,               -- random id of the process that holds it
    pid          INTEGER NOT NULL,
    host         TEXT NOT NULL,
    started_at   TEXT NOT NULL,
    heartbeat_at TEXT NOT NULL,
    stopped_at   TEXT,
    stop_reason  TEXT
);

CREATE TABLE recovery_runs (
    id                  INTEGER PRIMARY KEY,
    lane                TEXT NOT NULL,
    incarnation         TEXT NOT NULL,        -- the recovering process
    started_at          TEXT NOT NULL,
    lock_method         TEXT NOT NULL,        -- how death was proven, e.g. 'flock'
    evidence            TEXT NOT NULL,        -- JSON: lock, previous holder, heartbeat
    prev_pid            INTEGER,
    prev_host           TEXT,
    prev_incarnation    TEXT,
    prev_heartbeat_at   TEXT,
    attempts_closed     INTEGER NOT NULL DEFAULT 0,
    attempts_backfilled INTEGER NOT NULL DEFAULT 0,
    jobs_failed         INTEGER NOT NULL DEFAULT 0,
    anomalies           TEXT                  -- invariant breaks seen and left alone
);

CREATE TABLE job_attempts (
    id              INTEGER PRIMARY KEY,
    job_id          INTEGER NOT NULL REFERENCES jobs (id),
    attempt_number  INTEGER NOT NULL CHECK (attempt_number >= 1),
    status          TEXT NOT NULL CHECK (status IN ('running', 'failed', 'done')),
    error           TEXT,
    lane            TEXT,                     -- NULL only on attempts back-filled for legacy jobs
    started_at      TEXT,
    finished_at     TEXT,
    recovery_run_id INTEGER REFERENCES recovery_runs (id),
    UNIQUE (job_id, attempt_number)
);
CREATE UNIQUE INDEX job_attempts_one_running ON job_attempts (job_id) WHERE status = 'running';
CREATE INDEX job_attempts_running_lane ON job_attempts (lane) WHERE status = 'running';

-- Attempt history is append-only: a finished attempt never changes and no
-- attempt is ever deleted. The store never tries; these make sure.
CREATE TRIGGER job_attempts_finished_immutable
BEFORE UPDATE ON job_attempts WHEN OLD.status <> 'running'
BEGIN
    SELECT RAISE(ABORT, 'job_attempts: a finished attempt never changes');
END;
CREATE TRIGGER job_attempts_number_fixed
BEFORE UPDATE OF job_id, attempt_number ON job_attempts
BEGIN
    SELECT RAISE(ABORT, 'job_attempts: job_id and attempt_number never change');
END;
CREATE TRIGGER job_attempts_no_delete
BEFORE DELETE ON job_attempts
BEGIN
    SELECT RAISE(ABORT, 'job_attempts: attempts are never deleted');
END;

CREATE TABLE results (
    id         INTEGER PRIMARY KEY,
    job_id     INTEGER NOT NULL UNIQUE REFERENCES jobs (id),
    attempt_id INTEGER NOT NULL REFERENCES job_attempts (id),
    text       TEXT NOT NULL,
    created_at TEXT NOT NULL
);

CREATE TABLE charges (
    id                  INTEGER PRIMARY KEY,
    job_id              INTEGER NOT NULL UNIQUE REFERENCES jobs (id),
    attempt_id          INTEGER NOT NULL REFERENCES job_attempts (id),
    account             TEXT NOT NULL,
    amount_micros       INTEGER NOT NULL CHECK (amount_micros >= 0),
    provider_request_id TEXT NOT NULL,
    created_at          TEXT NOT NULL
);

CREATE INDEX job_attempts_recovery_run ON job_attempts (recovery_run_id) WHERE recovery_run_id IS NOT NULL;
