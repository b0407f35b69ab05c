-- Operator views at any size, PostgreSQL dialect: the same tables,
-- columns and words as migrations/sqlite/0004_overview_counts.sql, in
-- PostgreSQL's idioms. Replaces the views of 0002_overview.sql (same
-- names, same columns, plus lane_liveness.answers_waiting) so that
-- SELECT * FROM job_overview costs the same with ten jobs or ten million:
--
--   * job_counts keeps how many jobs are in each status (and how many
--     results and charges there are), maintained by triggers on jobs,
--     results and charges in the same transaction as the write: every
--     write path (the transitions, recovery, rescue, a person's UPDATE)
--     keeps it exact, and a crash loses the count with the write or
--     neither. Never write it by hand; drill and tests compare it with a
--     full count.
--   * Each kind is spread over 16 slots, and a transaction writes only the
--     slot of its own transaction id (pg_current_xact_id: PostgreSQL 13 or
--     later): lanes claiming and completing at the same time write
--     different rows instead of queueing on one row per status until each
--     other's commit. The views sum the slots.
--   * each status has a partial index on the time its jobs entered it, so
--     the oldest is one index probe: queued on jobs.queued_at (set by a
--     trigger when a job goes back to queued; NULL means created_at),
--     running on started_at, failed and done on finished_at.
--   * job_overview reads the counts, the four oldest, the queue's head and
--     the few running jobs; it never walks the queue, the failed jobs or
--     the done history. job_board stays one row per job that is not done;
--     a reader that wants a few picks them by id (WHERE id IN …, as the
--     store's Board does for inkwell status and the dashboard) and reads
--     only those rows.
--
-- And two wordings: a lane that holds provider answers the database has
-- not taken (lanes.answers_waiting, migration 0003) is named first, with
-- "do not restart"; and the running jobs of a silent lane say whether its
-- process still holds the lane's lock (pg_locks shows the session
-- advisory lock), since a silent lane may be dead or alive but stopped or
-- hung.

-- A lane runs many provider calls at once (serve --concurrency). Its row
-- says how many it may run (slots), how many it ran at its last heartbeat
-- (slots_in_use), and until when a provider's 429 pauses every call of the
-- lane (paused_until; NULL when not paused). Written by each heartbeat.
ALTER TABLE lanes ADD COLUMN slots INTEGER NOT NULL DEFAULT 1;
ALTER TABLE lanes ADD COLUMN slots_in_use INTEGER NOT NULL DEFAULT 0;
ALTER TABLE lanes ADD COLUMN paused_until timestamptz;

DROP VIEW job_overview;
DROP VIEW job_board;
DROP VIEW lane_liveness;

-- queued_at: when a job went back to queued, no earlier than its last
-- attempt's end; NULL while it has never left queued (it has been queued
-- since created_at). The store's statements never write it: the trigger
-- does, for every path that moves a job to queued.
ALTER TABLE jobs ADD COLUMN queued_at timestamptz;

UPDATE jobs j SET queued_at = GREATEST(j.created_at, (SELECT MAX(a.finished_at) FROM job_attempts a WHERE a.job_id = j.id))
WHERE j.status = 'queued' AND EXISTS (SELECT 1 FROM job_attempts a WHERE a.job_id = j.id);

CREATE FUNCTION jobs_queued_at() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.queued_at := GREATEST(NEW.created_at, (SELECT MAX(a.finished_at) FROM job_attempts a WHERE a.job_id = NEW.id));
    RETURN NEW;
END
$$;
CREATE TRIGGER jobs_queued_at
BEFORE UPDATE OF status ON jobs FOR EACH ROW
WHEN (NEW.status = 'queued' AND OLD.status IS DISTINCT FROM 'queued')
EXECUTE FUNCTION jobs_queued_at();

-- The oldest job of each status, by one index probe.
CREATE INDEX jobs_queued_since ON jobs ((COALESCE(queued_at, created_at)), id) WHERE status = 'queued';
CREATE INDEX jobs_running_since ON jobs (started_at, id) WHERE status = 'running';
CREATE INDEX jobs_failed_since ON jobs (finished_at, id) WHERE status = 'failed';
CREATE INDEX jobs_done_since ON jobs (finished_at) WHERE status = 'done';

-- job_counts: how many rows of each kind, spread over slots (see above).
-- A job is in exactly one kind (job_count_kind):
--   queued, running;
--   failed_refused     error 'provider: provider call: client error:…' (HTTP 4xx but 429);
--   failed_restarted   error 'worker restarted';
--   failed_after_call  any other 'provider:…' or 'shutdown:…' error;
--   failed_other       any other error;
--   done;
--   done_adopted       done, adopted from a legacy database as it was
--                      (request_hash 'legacy' and no lane: never run by Inkwell).
-- results and charges count those tables' rows. A slot may hold a
-- negative n (a job counted in by one transaction's slot, out by
-- another's); only the sum over slots means anything.
CREATE TABLE job_counts (
    kind text NOT NULL,
    slot integer NOT NULL,
    n    bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (kind, slot)
) WITH (fillfactor = 50);

CREATE FUNCTION job_count_kind(status text, error text, request_hash text, lane text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE status
               WHEN 'failed' THEN CASE WHEN error LIKE 'provider: provider call: client error:%' THEN 'failed_refused'
                                       WHEN error = 'worker restarted' THEN 'failed_restarted'
                                       WHEN error LIKE 'provider:%' OR error LIKE 'shutdown:%' THEN 'failed_after_call'
                                       ELSE 'failed_other' END
               WHEN 'done' THEN CASE WHEN request_hash = 'legacy' AND lane IS NULL THEN 'done_adopted' ELSE 'done' END
               ELSE status END
$$;

-- The order in which a transaction takes its slot's rows: each trigger
-- call below adds its kinds in this order, and every transaction's first
-- kind is queued (accept, claim, retry) or running (every outcome,
-- recovery, rescue), so two transactions that share a slot never wait on
-- each other in a circle.
CREATE FUNCTION job_count_rank(kind text) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT array_position(ARRAY['queued', 'running', 'failed_refused', 'failed_restarted', 'failed_after_call',
                                'failed_other', 'done', 'done_adopted', 'results', 'charges'], kind)
$$;

-- The triggers run once per statement, over its transition tables, and
-- add each kind's delta to this transaction's slot in one INSERT … ON
-- CONFLICT, in job_count_rank order: a statement that writes a million
-- rows adds one delta per kind, not a million (updating one row many times
-- in one transaction is quadratic in PostgreSQL: each update walks the
-- row's versions), and a single-row statement costs one small upsert.
CREATE FUNCTION job_counts_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO job_counts AS c (kind, slot, n)
        SELECT kind, pg_current_xact_id()::text::bigint % 16, COUNT(*)
        FROM (SELECT job_count_kind(status, error, request_hash, lane) AS kind FROM new_rows) x
        GROUP BY kind ORDER BY job_count_rank(kind)
        ON CONFLICT (kind, slot) DO UPDATE SET n = c.n + excluded.n;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO job_counts AS c (kind, slot, n)
        SELECT kind, pg_current_xact_id()::text::bigint % 16, -COUNT(*)
        FROM (SELECT job_count_kind(status, error, request_hash, lane) AS kind FROM old_rows) x
        GROUP BY kind ORDER BY job_count_rank(kind)
        ON CONFLICT (kind, slot) DO UPDATE SET n = c.n + excluded.n;
    ELSE
        INSERT INTO job_counts AS c (kind, slot, n)
        SELECT kind, pg_current_xact_id()::text::bigint % 16, SUM(d)
        FROM (SELECT job_count_kind(status, error, request_hash, lane) AS kind, 1 AS d FROM new_rows
              UNION ALL
              SELECT job_count_kind(status, error, request_hash, lane), -1 FROM old_rows) x
        GROUP BY kind HAVING SUM(d) <> 0 ORDER BY job_count_rank(kind)
        ON CONFLICT (kind, slot) DO UPDATE SET n = c.n + excluded.n;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER job_counts_jobs_insert AFTER INSERT ON jobs
REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION job_counts_jobs();
CREATE TRIGGER job_counts_jobs_update AFTER UPDATE ON jobs
REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION job_counts_jobs();
CREATE TRIGGER job_counts_jobs_delete AFTER DELETE ON jobs
REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION job_counts_jobs();

-- results and charges: TG_ARGV[0] names the kind.
CREATE FUNCTION job_counts_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO job_counts AS c (kind, slot, n)
        SELECT TG_ARGV[0], pg_current_xact_id()::text::bigint % 16, COUNT(*) FROM new_rows HAVING COUNT(*) > 0
        ON CONFLICT (kind, slot) DO UPDATE SET n = c.n + excluded.n;
    ELSE
        INSERT INTO job_counts AS c (kind, slot, n)
        SELECT TG_ARGV[0], pg_current_xact_id()::text::bigint % 16, -COUNT(*) FROM old_rows HAVING COUNT(*) > 0
        ON CONFLICT (kind, slot) DO UPDATE SET n = c.n + excluded.n;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER job_counts_results_insert AFTER INSERT ON results
REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION job_counts_rows('results');
CREATE TRIGGER job_counts_results_delete AFTER DELETE ON results
REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION job_counts_rows('results');
CREATE TRIGGER job_counts_charges_insert AFTER INSERT ON charges
REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION job_counts_rows('charges');
CREATE TRIGGER job_counts_charges_delete AFTER DELETE ON charges
REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION job_counts_rows('charges');

-- TRUNCATE fires no row-level trigger and has no transition table: it
-- empties the table's kinds.
CREATE FUNCTION job_counts_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'jobs' THEN
        DELETE FROM job_counts WHERE kind NOT IN ('results', 'charges');
    ELSE
        DELETE FROM job_counts WHERE kind = TG_TABLE_NAME;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER job_counts_jobs_truncated AFTER TRUNCATE ON jobs FOR EACH STATEMENT EXECUTE FUNCTION job_counts_truncated();
CREATE TRIGGER job_counts_results_truncated AFTER TRUNCATE ON results FOR EACH STATEMENT EXECUTE FUNCTION job_counts_truncated();
CREATE TRIGGER job_counts_charges_truncated AFTER TRUNCATE ON charges FOR EACH STATEMENT EXECUTE FUNCTION job_counts_truncated();

-- Back-fill from the rows already there, one pass per table. The table is
-- new and the migration runs under its own lock: no trigger has run yet.
INSERT INTO job_counts (kind, slot, n)
SELECT job_count_kind(status, error, request_hash, lane), 0, COUNT(*) FROM jobs GROUP BY 1;
INSERT INTO job_counts (kind, slot, n) SELECT 'results', 0, COUNT(*) FROM results;
INSERT INTO job_counts (kind, slot, n) SELECT 'charges', 0, COUNT(*) FROM charges;

-- lane_lock_held: whether a session holds lane's lock, the session
-- advisory lock (laneLockNS, laneLockKey(lane)) of postgres_lock.go: key 1
-- is 'inkw', key 2 the FNV-1a hash of 'lane:' || lane, as pg_locks shows
-- them (classid, objid as unsigned oids, objsubid 2).
CREATE FUNCTION lane_lock_held(lane text) RETURNS boolean
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    b bytea := convert_to('lane:' || lane, 'UTF8');
    h bigint := 2166136261;
BEGIN
    FOR i IN 0 .. length(b) - 1 LOOP
        h := ((h # get_byte(b, i)) * 16777619) & 4294967295;
    END LOOP;
    RETURN EXISTS (SELECT 1 FROM pg_locks
        WHERE locktype = 'advisory' AND granted AND objsubid = 2
          AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND classid = 1768844151::oid AND objid = h::oid);
END
$$;

-- lane_liveness: one row per lane. state is 'alive' (not stopped, heartbeat
-- no older than lane_silence_seconds), 'silent' (heartbeat too old: the
-- process is dead, or alive but stopped, hung or cut off) or 'stopped' (a
-- clean shutdown was recorded). answers_waiting is what the lane said at
-- its last heartbeat: provider answers it holds and could not store yet.
-- Liveness is for display; the lane lock alone decides that a holder is
-- dead.
CREATE VIEW lane_liveness AS
SELECT lane, state,
       state = 'alive' AS alive,
       age_s AS heartbeat_age_seconds,
       overview_age_text(age_s) AS heartbeat_age,
       running_jobs, heartbeat_at, pid, host, incarnation, started_at, stopped_at, stop_reason, answers_waiting,
       slots, slots_in_use, paused_until
FROM (
    SELECT l.name AS lane,
           CASE WHEN l.stopped_at IS NOT NULL THEN 'stopped'
                WHEN EXTRACT(EPOCH FROM statement_timestamp() - l.heartbeat_at)
                     <= (SELECT value FROM overview_settings WHERE name = 'lane_silence_seconds') THEN 'alive'
                ELSE 'silent' END AS state,
           GREATEST(0, ROUND(EXTRACT(EPOCH FROM statement_timestamp() - l.heartbeat_at)))::bigint AS age_s,
           (SELECT COUNT(*) FROM jobs j WHERE j.status = 'running' AND j.lane = l.name) AS running_jobs,
           l.heartbeat_at, l.pid, l.host, l.incarnation, l.started_at, l.stopped_at, l.stop_reason, l.answers_waiting,
           l.slots, l.slots_in_use,
           CASE WHEN l.paused_until > statement_timestamp() THEN l.paused_until END AS paused_until
    FROM lanes l
) x;

-- queue_state: one row: the queue's head (its first job in claim order),
-- the lanes that could claim it, and the head's next action. job_board
-- gives that action to the head, and to every queued job when nothing
-- will claim (no live lane, or a live lane that does not); job_overview
-- gives it to the queued row.
CREATE VIEW queue_state AS
SELECT q.*,
       CASE
           WHEN q.head_id IS NULL THEN NULL
           WHEN q.live_lane IS NULL THEN
               'no live worker lane: start inkwell serve'
               || CASE WHEN q.lanes_seen IS NULL THEN ' (no lane has ever registered)'
                       ELSE ' (last seen: ' || q.lanes_seen || ')' END
           WHEN q.idle_lane IS NOT NULL AND q.head_age_s > q.stall_s THEN
               'not moving: lane ' || q.idle_lane || ' is alive and idle but has not claimed job ' || q.head_id
               || ', queued ' || overview_age_text(q.head_age_s) || ': read that lane''s log (database errors?) and restart it'
           ELSE
               'wait: lane ' || COALESCE(q.idle_lane, q.live_lane) || ' claims next'
               || CASE WHEN q.idle_lane IS NULL THEN ', when its running job ends' ELSE '' END
       END AS head_action,
       q.live_lane IS NULL OR (q.idle_lane IS NOT NULL AND q.head_age_s > q.stall_s) AS stuck
FROM (
    SELECT
        (SELECT MIN(lane) FROM lane_liveness WHERE alive AND running_jobs = 0) AS idle_lane,
        (SELECT MIN(lane) FROM lane_liveness WHERE alive) AS live_lane,
        (SELECT string_agg(lane || ' ' || state || ' ' || heartbeat_age, ', ' ORDER BY lane) FROM lane_liveness) AS lanes_seen,
        (SELECT value FROM overview_settings WHERE name = 'claim_stall_seconds') AS stall_s,
        h.id AS head_id,
        CASE WHEN h.since IS NOT NULL THEN GREATEST(0, ROUND(EXTRACT(EPOCH FROM statement_timestamp() - h.since)))::bigint END AS head_age_s,
        -- The 1000th queued job in claim order: job_board counts the place
        -- of a job up to it on the index (cheap near the head) and ranks
        -- the rest once per statement (see job_board).
        (SELECT id FROM jobs WHERE status = 'queued' ORDER BY id LIMIT 1 OFFSET 999) AS counted_to
    FROM (SELECT 1) one
    LEFT JOIN (SELECT id, COALESCE(queued_at, created_at) AS since FROM jobs WHERE status = 'queued' ORDER BY id LIMIT 1) h ON true
) q;

-- job_board: every job that is not done, with its own next safe action:
-- running jobs first, then queued in claim order, then failed. since is
-- when the job entered its status: accepted (or, for a retried job, no
-- earlier than its last attempt's end: queued_at), started, or failed.
-- A queued job's place ("N queued ahead": claims go in id order) is
-- counted on the jobs_queued index for the first 1000 jobs, and found by
-- binary search (width_bucket) in the sorted ids of the queue, read once
-- per statement and only if needed, beyond them: so a reader that picks
-- its rows by id (WHERE id IN …, as the store's Board does for the
-- dashboard and inkwell status) reads only those rows, and one that reads
-- every row reads each once.
CREATE VIEW job_board AS
SELECT b.id, b.status, b.lane,
       COALESCE((SELECT MAX(a.attempt_number) FROM job_attempts a WHERE a.job_id = b.id), 0) AS attempt,
       b.since,
       b.age_s AS age_seconds,
       overview_age_text(b.age_s) AS age,
       b.error,
       CASE
           WHEN b.status = 'queued' AND (q.stuck OR b.id = q.head_id) THEN q.head_action
           WHEN b.status = 'queued' THEN
               'wait: '
               || CASE WHEN q.counted_to IS NULL OR b.id <= q.counted_to
                       THEN (SELECT COUNT(*) FROM jobs a WHERE a.status = 'queued' AND a.id < b.id)
                       ELSE width_bucket(b.id, (SELECT array_agg(id ORDER BY id) FROM jobs WHERE status = 'queued')) - 1 END
               || ' queued ahead; live lanes claim in id order'
           WHEN b.status = 'running' THEN (
               SELECT
                   CASE WHEN ll.answers_waiting > 0 AND ll.state <> 'stopped' THEN
                       'answer waiting to be stored: lane ' || ll.lane || ' holds ' || ll.answers_waiting || ' provider answer'
                       || CASE WHEN ll.answers_waiting > 1 THEN 's' ELSE '' END
                       || ' the database has not taken yet (busy, locked or full?): free the database (a long transaction in another process? disk full?); '
                       || 'do not restart lane ' || ll.lane || ', a restart loses those answers; '
                   ELSE '' END
                   || CASE
                       WHEN ll.alive THEN
                           'wait: running on live lane ' || b.lane || ' (attempt '
                           || (SELECT MAX(a.attempt_number) FROM job_attempts a WHERE a.job_id = b.id)
                           || ', heartbeat ' || ll.heartbeat_age || ' ago)'
                       WHEN b.lane IS NULL THEN
                           'restart any lane: its startup recovery closes these as failed (a legacy running job with no lane; inkwell serve)'
                       WHEN ll.state = 'silent' AND lane_lock_held(b.lane) THEN
                           'lane ' || b.lane || ' silent for ' || ll.heartbeat_age || ', its process pid ' || ll.pid || ' on host ' || ll.host
                           || ' still holds the lock (stopped or hung?): inspect it; ending it lets recovery close its attempts'
                       WHEN ll.state = 'silent' THEN
                           'lane ' || b.lane || ' is dead (its lock is free): restart it'
                           || CASE WHEN q.live_lane IS NOT NULL THEN ', or a live lane rescues its jobs within --rescue-interval'
                                   ELSE ': inkwell serve --lane ' || b.lane END
                       ELSE
                           'restart that lane: its startup recovery closes these as failed (lane ' || b.lane || ' '
                           || COALESCE(ll.state || ', last heartbeat ' || ll.heartbeat_age || ' ago', 'never registered')
                           || '; inkwell serve --lane ' || b.lane || ')'
                           -- PostgreSQL only: live lanes rescue a dead lane's orphans once
                           -- its lock session ends, so a row still here means it has not.
                           || CASE WHEN q.live_lane IS NOT NULL THEN '; live lanes rescue them by themselves once that lane''s lock session ends' ELSE '' END
                   END
               FROM (SELECT 1) one LEFT JOIN lane_liveness ll ON ll.lane = b.lane)
           WHEN b.error = 'worker restarted' THEN
               'inspect the error, then inkwell retry ' || b.id
               || ' (the worker died during the attempt, so the provider may already have billed it; the retry reuses the job''s provider key, so the provider answers from its record)'
           -- Before 'provider:%': the provider refused the request itself
           -- (HTTP 4xx other than 429), and refuses it again until its
           -- cause is fixed. The text is worker/job.go's "provider: " and
           -- provider.CallError's "provider call: client error: ...".
           WHEN b.error LIKE 'provider: provider call: client error:%' THEN
               'inspect the error and fix its cause (the API key, the model or the request) before inkwell retry ' || b.id
               || ' (the provider refused the request: a retry as it is fails the same way)'
           WHEN b.error LIKE 'provider:%' OR b.error LIKE 'shutdown:%' THEN
               'inspect the error, then inkwell retry ' || b.id
               || ' (failed after the provider call had begun; the retry reuses the job''s provider key, so the provider answers from its record)'
           ELSE 'inspect the error, then inkwell retry ' || b.id
       END AS next_action
FROM (
    SELECT o.*, CASE WHEN o.since IS NOT NULL THEN GREATEST(0, ROUND(EXTRACT(EPOCH FROM statement_timestamp() - o.since)))::bigint END AS age_s
    FROM (
        -- One branch per status, so each reads its partial index and none
        -- scans the done history.
        SELECT id, 'running'::text AS status, lane, error, started_at AS since FROM jobs WHERE status = 'running'
        UNION ALL
        SELECT id, 'queued'::text, lane, error, COALESCE(queued_at, created_at) FROM jobs WHERE status = 'queued'
        UNION ALL
        SELECT id, 'failed'::text, lane, error, finished_at FROM jobs WHERE status = 'failed'
    ) o
) b
CROSS JOIN queue_state q
ORDER BY CASE b.status WHEN 'running' THEN 1 WHEN 'queued' THEN 2 ELSE 3 END, b.id;

-- job_overview: exactly four rows, queued, running, failed, done, zero
-- counts included. oldest_job_id and oldest_age name the job longest in
-- that status (done names none). Counts come from job_counts; the oldest
-- of each status is one probe of its index; the queue's action is its
-- head's (queue_state); the running row reads the few running jobs, by
-- lane.
CREATE VIEW job_overview AS
WITH
k AS (
    SELECT
        COALESCE(SUM(n) FILTER (WHERE kind = 'queued'), 0) AS queued,
        COALESCE(SUM(n) FILTER (WHERE kind = 'running'), 0) AS running,
        COALESCE(SUM(n) FILTER (WHERE kind = 'failed_refused'), 0) AS refused,
        COALESCE(SUM(n) FILTER (WHERE kind = 'failed_restarted'), 0) AS restarted,
        COALESCE(SUM(n) FILTER (WHERE kind = 'failed_after_call'), 0) AS after_call,
        COALESCE(SUM(n) FILTER (WHERE kind = 'failed_other'), 0) AS failed_other,
        COALESCE(SUM(n) FILTER (WHERE kind = 'done'), 0) AS done,
        COALESCE(SUM(n) FILTER (WHERE kind = 'done_adopted'), 0) AS adopted,
        COALESCE(SUM(n) FILTER (WHERE kind = 'results'), 0) AS results,
        COALESCE(SUM(n) FILTER (WHERE kind = 'charges'), 0) AS charges
    FROM job_counts
),
oldest AS (
    SELECT 'queued' AS status, id, since FROM (
        SELECT id, COALESCE(queued_at, created_at) AS since FROM jobs
        WHERE status = 'queued' AND COALESCE(queued_at, created_at) IS NOT NULL
        ORDER BY COALESCE(queued_at, created_at), id LIMIT 1) x
    UNION ALL
    SELECT 'running', id, started_at FROM (
        SELECT id, started_at FROM jobs WHERE status = 'running' AND started_at IS NOT NULL ORDER BY started_at, id LIMIT 1) x
    UNION ALL
    SELECT 'failed', id, finished_at FROM (
        SELECT id, finished_at FROM jobs WHERE status = 'failed' AND finished_at IS NOT NULL ORDER BY finished_at, id LIMIT 1) x
    UNION ALL
    SELECT 'done', NULL, finished_at FROM (
        SELECT finished_at FROM jobs WHERE status = 'done' AND finished_at IS NOT NULL ORDER BY finished_at LIMIT 1) x
),
counted AS (
    SELECT s.status, s.ord, s.jobs, o.id AS oldest_job_id,
           CASE WHEN o.since IS NOT NULL THEN GREATEST(0, ROUND(EXTRACT(EPOCH FROM statement_timestamp() - o.since)))::bigint END AS oldest_age_seconds
    FROM (
        SELECT 'queued' AS status, 1 AS ord, queued AS jobs FROM k
        UNION ALL SELECT 'running', 2, running FROM k
        UNION ALL SELECT 'failed', 3, refused + restarted + after_call + failed_other FROM k
        UNION ALL SELECT 'done', 4, done + adopted FROM k
    ) s
    LEFT JOIN oldest o ON o.status = s.status
),
first_failed AS (
    SELECT id, COALESCE(error LIKE 'provider: provider call: client error:%', false) AS refused
    FROM jobs WHERE status = 'failed' ORDER BY id LIMIT 1
),
running_lanes AS (
    SELECT j.lane, COUNT(*) AS n, COALESCE(ll.alive, false) AS alive, ll.state, ll.heartbeat_age, ll.pid, ll.host,
           -- a live lane as operators read it: "east (12 of 16 slots)", and
           -- when a provider's 429 holds its calls, until when
           j.lane || ' (' || COUNT(*) || ' of ' || COALESCE(ll.slots, 1) || ' slots'
           || COALESCE(', paused by the provider''s 429 until ' || to_char(ll.paused_until AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), '') || ')' AS seen_live
    FROM jobs j LEFT JOIN lane_liveness ll ON ll.lane = j.lane
    WHERE j.status = 'running'
    GROUP BY j.lane, ll.alive, ll.state, ll.heartbeat_age, ll.pid, ll.host, ll.slots, ll.paused_until
),
running_summary AS (
    SELECT
        EXISTS (SELECT 1 FROM lane_liveness WHERE alive) AS any_live,
        (SELECT string_agg('answer waiting to be stored: lane ' || lane || ' holds ' || answers_waiting || ' provider answer'
                           || CASE WHEN answers_waiting > 1 THEN 's' ELSE '' END
                           || ' the database has not taken yet (busy, locked or full?): free the database (a long transaction in another process? disk full?); '
                           || 'do not restart lane ' || lane || ', a restart loses those answers', '; ' ORDER BY lane)
         FROM lane_liveness WHERE answers_waiting > 0 AND state <> 'stopped') AS answers,
        (SELECT string_agg(
                    CASE WHEN lane_lock_held(lane) THEN
                             'lane ' || lane || ' silent for ' || heartbeat_age || ', its process pid ' || pid || ' on host ' || host
                             || ' still holds the lock (stopped or hung?): inspect it; ending it lets recovery close its attempts'
                         ELSE
                             'lane ' || lane || ' is dead (its lock is free): restart it'
                             || CASE WHEN EXISTS (SELECT 1 FROM lane_liveness WHERE alive)
                                     THEN ', or a live lane rescues its jobs within --rescue-interval'
                                     ELSE ': inkwell serve --lane ' || lane END
                    END, '; ' ORDER BY lane)
         FROM running_lanes WHERE state = 'silent' AND lane IS NOT NULL) AS silent,
        (SELECT string_agg(n || ' on lane ' || COALESCE(lane, '(none: legacy)') || ' '
                           || COALESCE(state || ', last heartbeat ' || heartbeat_age || ' ago', 'never registered'), '; ' ORDER BY lane)
         FROM running_lanes WHERE NOT alive AND (state IS DISTINCT FROM 'silent' OR lane IS NULL)) AS dead,
        (SELECT SUM(n) FROM running_lanes WHERE alive) AS live_n,
        (SELECT string_agg(seen_live, ', ' ORDER BY lane) FROM running_lanes WHERE alive) AS live_lanes
),
running_action AS (
    SELECT substr(COALESCE('; ' || r.silent, '')
                  || COALESCE('; restart that lane: its startup recovery closes these as failed (' || r.dead || ')'
                              || CASE WHEN r.any_live THEN '; live lanes rescue them by themselves once that lane''s lock session ends' ELSE '' END, '')
                  || CASE WHEN r.silent IS NULL AND r.dead IS NULL THEN '; wait: running on live lane ' || r.live_lanes
                          WHEN r.live_n > 0 THEN '; ' || r.live_n || ' more on live lane ' || r.live_lanes || ': wait'
                          ELSE '' END, 3) AS action,
           r.answers
    FROM running_summary r
)
SELECT c.status, c.jobs, c.oldest_job_id, c.oldest_age_seconds,
       overview_age_text(c.oldest_age_seconds) AS oldest_age,
       CASE
           -- A lane holding answers the database has not taken comes first:
           -- restarting it (what a silent lane would otherwise ask) loses them.
           WHEN c.status = 'running' AND ra.answers IS NOT NULL THEN
               ra.answers || '; ' || CASE WHEN c.jobs = 0 THEN 'nothing running' ELSE ra.action END
           WHEN c.jobs = 0 AND c.status = 'queued' THEN 'nothing queued'
           WHEN c.jobs = 0 AND c.status = 'running' THEN 'nothing running'
           WHEN c.jobs = 0 AND c.status = 'failed' THEN 'nothing to retry'
           WHEN c.status = 'done' AND k.done - LEAST(k.results, k.charges) > 0 THEN (
               -- Every done job Inkwell ran has its result and charge: both
               -- are unique per job and written only by Complete, with the
               -- job's done, which is final; so none lacks one exactly when
               -- there are as many results, and as many charges, as such
               -- jobs. The kept counts say so; finding the job that lacks
               -- one walks the history, only when they say there is one.
               SELECT 'inspect job ' || MIN(j.id) || ' (inkwell show ' || MIN(j.id) || '): done without its result or charge, '
                      || 'which breaks an invariant; nothing rewrites it'
               FROM jobs j
               WHERE j.status = 'done' AND NOT (j.request_hash = 'legacy' AND j.lane IS NULL)
                 AND (NOT EXISTS (SELECT 1 FROM results r WHERE r.job_id = j.id)
                      OR NOT EXISTS (SELECT 1 FROM charges ch WHERE ch.job_id = j.id)))
           WHEN c.status = 'done' AND k.adopted > 0 AND k.adopted = c.jobs THEN
               'nothing to do: adopted from a legacy database as they were (the old Inkwell kept no result or charge)'
           WHEN c.status = 'done' AND k.adopted > 0 THEN
               'nothing to do: each has its result and charge, but for ' || k.adopted
               || ' adopted from a legacy database as they were (the old Inkwell kept no result or charge)'
           WHEN c.status = 'done' THEN 'nothing to do: each has its result and charge'
           -- The queue moves in id order: its head's action is the queue's.
           WHEN c.status = 'queued' THEN (SELECT head_action FROM queue_state)
           WHEN c.status = 'running' THEN ra.action
           ELSE
               'inspect the error'
               || CASE WHEN f.refused THEN ' and fix its cause' ELSE '' END
               || ', then inkwell retry ' || f.id
               || CASE WHEN c.jobs > 1 THEN ' (and ' || (c.jobs - 1) || ' more: SELECT * FROM job_board)' ELSE '' END
               || CASE WHEN k.refused > 0 THEN
                      '; ' || k.refused || ' refused by the provider (HTTP 4xx): fix the API key, the model or the request first, or the retry fails the same way'
                  ELSE '' END
               || CASE WHEN k.restarted + k.after_call > 0 THEN
                      '; ' || (k.restarted + k.after_call) || ' failed after the provider call had begun'
                      || CASE WHEN k.restarted > 0 THEN ' (' || k.restarted || ' by a worker restart: the provider may already have billed them)' ELSE '' END
                      || ': the retry reuses the job''s provider key, so the provider answers from its record'
                  ELSE '' END
       END AS next_action
FROM counted c
CROSS JOIN k
CROSS JOIN running_action ra
LEFT JOIN first_failed f ON c.status = 'failed'
ORDER BY c.ord;
