-- A job's life without a human for the routine cases (DESIGN.md §9),
-- PostgreSQL dialect (the same columns and meanings as
-- migrations/sqlite/0005_job_life.sql).
--
--   * error_class on attempts and jobs: what kind of failure it was, as
--     data. The operator views and the retry policy decide on it, never on
--     the error's wording. On a failed job it is the class of the failure
--     that ended it; on a queued job that an automatic retry put back, the
--     class of the failure it waits out; NULL otherwise.
--   * not_before: a queued job put back by an automatic retry is not
--     claimed before this time (its back-off). NULL: claim at once.
--   * gave_up_after: the number of attempts after which automatic retry
--     gave up (--max-attempts); NULL when it did not.
--   * pruned_at: when retention removed the job's prompt and text.
--   * installation: one row, written once, whose id goes into every
--     provider idempotency key, so two databases never share one.

ALTER TABLE job_attempts ADD COLUMN error_class text CHECK (error_class IN (
    'not_sent', 'rate_limited', 'provider_error', 'rejected', 'malformed', 'unstorable',
    'timeout', 'worker_restarted', 'shutdown', 'cancelled', 'legacy'));
ALTER TABLE jobs ADD COLUMN error_class text CHECK (error_class IN (
    'not_sent', 'rate_limited', 'provider_error', 'rejected', 'malformed', 'unstorable',
    'timeout', 'worker_restarted', 'shutdown', 'cancelled', 'legacy'));
ALTER TABLE jobs ADD COLUMN not_before timestamptz;
ALTER TABLE jobs ADD COLUMN gave_up_after integer;
ALTER TABLE jobs ADD COLUMN pruned_at timestamptz;

-- Queued jobs waiting out a back-off, by when they may run.
CREATE INDEX jobs_backoff ON jobs (not_before) WHERE status = 'queued' AND not_before IS NOT NULL;
-- Finished jobs retention has not pruned yet, oldest first.
CREATE INDEX jobs_unpruned ON jobs (finished_at) WHERE status IN ('done', 'failed') AND pruned_at IS NULL;

-- Classify the failures already stored from the words Inkwell wrote for
-- them; 'legacy' where the words do not tell. A finished attempt never
-- changes: the trigger that says so is disabled for this one UPDATE, in
-- this migration's transaction (DDL is transactional here), and enabled again.
ALTER TABLE job_attempts DISABLE TRIGGER job_attempts_finished_immutable;
UPDATE job_attempts SET error_class = CASE
        WHEN error = 'worker restarted' THEN 'worker_restarted'
        WHEN error LIKE 'provider: provider call: timeout:%' OR error LIKE 'provider: provider call: network error:%' THEN 'timeout'
        WHEN error LIKE 'provider: provider call: connection refused:%' THEN 'not_sent'
        WHEN error LIKE 'provider: provider call: rate limited:%' THEN 'rate_limited'
        WHEN error LIKE 'provider: provider call: server error: HTTP 502:%' OR error LIKE 'provider: provider call: server error: HTTP 504:%' THEN 'timeout'
        WHEN error LIKE 'provider: provider call: server error:%' THEN 'provider_error'
        WHEN error LIKE 'provider: provider call: client error:%' OR error LIKE 'payload unreadable:%' THEN 'rejected'
        WHEN error LIKE 'provider: provider call: malformed answer:%' THEN 'malformed'
        WHEN error LIKE 'provider: provider call: canceled:%' OR error LIKE 'shutdown:%' THEN 'shutdown'
        WHEN error LIKE 'could not store the provider''s answer:%' THEN 'unstorable'
        ELSE 'legacy' END
WHERE status = 'failed';
ALTER TABLE job_attempts ENABLE TRIGGER job_attempts_finished_immutable;

UPDATE jobs SET error_class = CASE
        WHEN error = 'worker restarted' THEN 'worker_restarted'
        WHEN error LIKE 'provider: provider call: timeout:%' OR error LIKE 'provider: provider call: network error:%' THEN 'timeout'
        WHEN error LIKE 'provider: provider call: connection refused:%' THEN 'not_sent'
        WHEN error LIKE 'provider: provider call: rate limited:%' THEN 'rate_limited'
        WHEN error LIKE 'provider: provider call: server error: HTTP 502:%' OR error LIKE 'provider: provider call: server error: HTTP 504:%' THEN 'timeout'
        WHEN error LIKE 'provider: provider call: server error:%' THEN 'provider_error'
        WHEN error LIKE 'provider: provider call: client error:%' OR error LIKE 'payload unreadable:%' THEN 'rejected'
        WHEN error LIKE 'provider: provider call: malformed answer:%' THEN 'malformed'
        WHEN error LIKE 'provider: provider call: canceled:%' OR error LIKE 'shutdown:%' THEN 'shutdown'
        WHEN error LIKE 'could not store the provider''s answer:%' THEN 'unstorable'
        ELSE 'legacy' END
WHERE status = 'failed';

-- keys_from_job: jobs with a smaller id may already have reached the
-- provider under the key without an installation id, and keep it (a retry
-- under a new key could be billed twice); every later job's key carries id.
CREATE TABLE installation (
    one           integer PRIMARY KEY CHECK (one = 1),
    id            text NOT NULL,
    created_at    timestamptz NOT NULL,
    keys_from_job bigint NOT NULL
);
INSERT INTO installation (one, id, created_at, keys_from_job)
SELECT 1, replace(gen_random_uuid()::text, '-', ''), clock_timestamp(), COALESCE(MAX(id), 0) + 1 FROM jobs;
CREATE FUNCTION installation_written_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'installation: written once by the migration, never changed' USING ERRCODE = 'integrity_constraint_violation';
END
$$;
CREATE TRIGGER installation_written_once
BEFORE UPDATE OR DELETE ON installation FOR EACH ROW
EXECUTE FUNCTION installation_written_once();
