-- Operator views at any size, SQLite dialect. Replaces the views of
-- 0002_overview.sql (same names, same columns, plus lane_liveness.
-- answers_waiting) so that SELECT * FROM job_overview costs the same with
-- ten jobs or ten million:
--
--   * job_counts keeps how many jobs are in each status (and how many
--     results and charges there are), maintained by triggers on jobs,
--     results and charges in the same transaction as the write: every
--     write path (the transitions, recovery, legacy adoption, a person's
--     UPDATE) keeps it exact, and a crash loses the count with the write
--     or neither. Never write it by hand; drill and tests compare it with
--     a full count.
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
-- "do not restart"; and the running jobs of a silent lane name its
-- process, since a silent lane may be dead or alive but stopped or hung
-- (SQLite cannot see the flock, so the words cover both).

-- A lane runs many provider calls at once (serve --concurrency). Its row
-- says how many it may run (slots), how many it ran at its last heartbeat
-- (slots_in_use), and until when a provider's 429 pauses every call of the
-- lane (paused_until; NULL when not paused). Written by each heartbeat.
ALTER TABLE lanes ADD COLUMN slots INTEGER NOT NULL DEFAULT 1;
ALTER TABLE lanes ADD COLUMN slots_in_use INTEGER NOT NULL DEFAULT 0;
ALTER TABLE lanes ADD COLUMN paused_until TEXT;

DROP VIEW job_overview;
DROP VIEW job_board;
DROP VIEW lane_liveness;

-- queued_at: when a job went back to queued, no earlier than its last
-- attempt's end; NULL while it has never left queued (it has been queued
-- since created_at). The store's statements never write it: the trigger
-- does, for every path that moves a job to queued.
ALTER TABLE jobs ADD COLUMN queued_at TEXT;

UPDATE jobs SET queued_at = (
        SELECT MAX(jobs.created_at, COALESCE(MAX(a.finished_at), jobs.created_at))
        FROM job_attempts a WHERE a.job_id = jobs.id)
WHERE status = 'queued' AND EXISTS (SELECT 1 FROM job_attempts a WHERE a.job_id = jobs.id);

-- Text order is time order (fixed-width UTC text; legacy 'YYYY-MM-DD
-- HH:MM:SS' rows sort before Inkwell's own, which they precede), so MAX
-- on the text is the later time, as julianday would say.
CREATE TRIGGER jobs_queued_at
AFTER UPDATE OF status ON jobs
WHEN NEW.status = 'queued' AND OLD.status IS NOT 'queued'
BEGIN
    UPDATE jobs SET queued_at = (
            SELECT MAX(NEW.created_at, COALESCE(MAX(a.finished_at), NEW.created_at))
            FROM job_attempts a WHERE a.job_id = NEW.id)
    WHERE id = NEW.id;
END;

-- The oldest job of each status, by one index probe.
CREATE INDEX jobs_queued_since ON jobs (COALESCE(queued_at, created_at), id) WHERE status = 'queued';
CREATE INDEX jobs_running_since ON jobs (started_at, id) WHERE status = 'running';
CREATE INDEX jobs_failed_since ON jobs (finished_at, id) WHERE status = 'failed';
CREATE INDEX jobs_done_since ON jobs (finished_at) WHERE status = 'done';

-- job_counts: one row per kind (slot is always 0 here; PostgreSQL spreads
-- each kind over slots so that concurrent lanes do not queue on one row).
-- A job is in exactly one kind:
--   queued, running;
--   failed_refused     error 'provider: provider call: client error:…' (HTTP 4xx but 429);
--   failed_restarted   error 'worker restarted';
--   failed_after_call  any other 'provider:…' or 'shutdown:…' error;
--   failed_other       any other error;
--   done;
--   done_adopted       done, adopted from a legacy database as it was
--                      (request_hash 'legacy' and no lane: never run by Inkwell).
-- results and charges count those tables' rows.
CREATE TABLE job_counts (
    kind TEXT NOT NULL,
    slot INTEGER NOT NULL DEFAULT 0,
    n    INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (kind, slot)
) WITHOUT ROWID;

-- Back-fill from the rows already there, in one pass over jobs. The kind
-- of a jobs row is this CASE, written out again in each trigger below
-- (SQLite has no SQL functions): the copies are the same expression.
INSERT INTO job_counts (kind, slot, n)
SELECT kind, 0, COUNT(*) FROM (
    SELECT CASE j.status
               WHEN 'failed' THEN CASE WHEN j.error LIKE 'provider: provider call: client error:%' THEN 'failed_refused'
                                       WHEN j.error = 'worker restarted' THEN 'failed_restarted'
                                       WHEN j.error LIKE 'provider:%' OR j.error LIKE 'shutdown:%' THEN 'failed_after_call'
                                       ELSE 'failed_other' END
               WHEN 'done' THEN CASE WHEN j.request_hash = 'legacy' AND j.lane IS NULL THEN 'done_adopted' ELSE 'done' END
               ELSE j.status END AS kind
    FROM jobs j)
GROUP BY kind;
INSERT INTO job_counts (kind, slot, n) SELECT 'results', 0, COUNT(*) FROM results;
INSERT INTO job_counts (kind, slot, n) SELECT 'charges', 0, COUNT(*) FROM charges;
INSERT OR IGNORE INTO job_counts (kind, slot, n)
SELECT column1, 0, 0 FROM (VALUES ('queued'), ('running'), ('failed_refused'), ('failed_restarted'), ('failed_after_call'),
    ('failed_other'), ('done'), ('done_adopted'), ('results'), ('charges'));

CREATE TRIGGER job_counts_jobs_insert
AFTER INSERT ON jobs
BEGIN
    INSERT INTO job_counts (kind, slot, n) VALUES (
        CASE NEW.status
            WHEN 'failed' THEN CASE WHEN NEW.error LIKE 'provider: provider call: client error:%' THEN 'failed_refused'
                                    WHEN NEW.error = 'worker restarted' THEN 'failed_restarted'
                                    WHEN NEW.error LIKE 'provider:%' OR NEW.error LIKE 'shutdown:%' THEN 'failed_after_call'
                                    ELSE 'failed_other' END
            WHEN 'done' THEN CASE WHEN NEW.request_hash = 'legacy' AND NEW.lane IS NULL THEN 'done_adopted' ELSE 'done' END
            ELSE NEW.status END, 0, 1)
    ON CONFLICT (kind, slot) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER job_counts_jobs_update
AFTER UPDATE OF status, error, request_hash, lane ON jobs
BEGIN
    INSERT INTO job_counts (kind, slot, n) VALUES (
        CASE OLD.status
            WHEN 'failed' THEN CASE WHEN OLD.error LIKE 'provider: provider call: client error:%' THEN 'failed_refused'
                                    WHEN OLD.error = 'worker restarted' THEN 'failed_restarted'
                                    WHEN OLD.error LIKE 'provider:%' OR OLD.error LIKE 'shutdown:%' THEN 'failed_after_call'
                                    ELSE 'failed_other' END
            WHEN 'done' THEN CASE WHEN OLD.request_hash = 'legacy' AND OLD.lane IS NULL THEN 'done_adopted' ELSE 'done' END
            ELSE OLD.status END, 0, -1)
    ON CONFLICT (kind, slot) DO UPDATE SET n = n - 1;
    INSERT INTO job_counts (kind, slot, n) VALUES (
        CASE NEW.status
            WHEN 'failed' THEN CASE WHEN NEW.error LIKE 'provider: provider call: client error:%' THEN 'failed_refused'
                                    WHEN NEW.error = 'worker restarted' THEN 'failed_restarted'
                                    WHEN NEW.error LIKE 'provider:%' OR NEW.error LIKE 'shutdown:%' THEN 'failed_after_call'
                                    ELSE 'failed_other' END
            WHEN 'done' THEN CASE WHEN NEW.request_hash = 'legacy' AND NEW.lane IS NULL THEN 'done_adopted' ELSE 'done' END
            ELSE NEW.status END, 0, 1)
    ON CONFLICT (kind, slot) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER job_counts_jobs_delete
AFTER DELETE ON jobs
BEGIN
    INSERT INTO job_counts (kind, slot, n) VALUES (
        CASE OLD.status
            WHEN 'failed' THEN CASE WHEN OLD.error LIKE 'provider: provider call: client error:%' THEN 'failed_refused'
                                    WHEN OLD.error = 'worker restarted' THEN 'failed_restarted'
                                    WHEN OLD.error LIKE 'provider:%' OR OLD.error LIKE 'shutdown:%' THEN 'failed_after_call'
                                    ELSE 'failed_other' END
            WHEN 'done' THEN CASE WHEN OLD.request_hash = 'legacy' AND OLD.lane IS NULL THEN 'done_adopted' ELSE 'done' END
            ELSE OLD.status END, 0, -1)
    ON CONFLICT (kind, slot) DO UPDATE SET n = n - 1;
END;

CREATE TRIGGER job_counts_results_insert AFTER INSERT ON results
BEGIN
    INSERT INTO job_counts (kind, slot, n) VALUES ('results', 0, 1) ON CONFLICT (kind, slot) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER job_counts_results_delete AFTER DELETE ON results
BEGIN
    INSERT INTO job_counts (kind, slot, n) VALUES ('results', 0, -1) ON CONFLICT (kind, slot) DO UPDATE SET n = n - 1;
END;
CREATE TRIGGER job_counts_charges_insert AFTER INSERT ON charges
BEGIN
    INSERT INTO job_counts (kind, slot, n) VALUES ('charges', 0, 1) ON CONFLICT (kind, slot) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER job_counts_charges_delete AFTER DELETE ON charges
BEGIN
    INSERT INTO job_counts (kind, slot, n) VALUES ('charges', 0, -1) ON CONFLICT (kind, slot) DO UPDATE SET n = n - 1;
END;

-- lane_liveness: one row per lane. state is 'alive' (not stopped, heartbeat
-- no older than lane_silence_seconds), 'silent' (heartbeat too old: the
-- process is dead, or alive but stopped, hung or cut off) or 'stopped' (a
-- clean shutdown was recorded). A heartbeat from a clock ahead of this one
-- counts as fresh. answers_waiting is what the lane said at its last
-- heartbeat: provider answers it holds and could not store yet. Liveness
-- is for display; the lane lock alone decides a holder is dead.
CREATE VIEW lane_liveness AS
SELECT lane, state,
       CASE state WHEN 'alive' THEN 1 ELSE 0 END AS alive,
       age_s AS heartbeat_age_seconds,
       CASE WHEN age_s < 60 THEN printf('%ds', age_s)
            WHEN age_s < 3600 THEN printf('%dm%02ds', age_s / 60, age_s % 60)
            WHEN age_s < 86400 THEN printf('%dh%02dm', age_s / 3600, age_s % 3600 / 60)
            ELSE printf('%dd%02dh', age_s / 86400, age_s % 86400 / 3600) END AS heartbeat_age,
       running_jobs, heartbeat_at, pid, host, incarnation, started_at, stopped_at, stop_reason, answers_waiting,
       slots, slots_in_use, paused_until
FROM (
    SELECT l.name AS lane,
           CASE WHEN l.stopped_at IS NOT NULL THEN 'stopped'
                WHEN (julianday('now') - julianday(l.heartbeat_at)) * 86400.0
                     <= (SELECT value FROM overview_settings WHERE name = 'lane_silence_seconds') THEN 'alive'
                ELSE 'silent' END AS state,
           CAST(MAX(0, ROUND((julianday('now') - julianday(l.heartbeat_at)) * 86400.0)) AS INTEGER) AS age_s,
           (SELECT COUNT(*) FROM jobs j WHERE j.status = 'running' AND j.lane = l.name) AS running_jobs,
           l.heartbeat_at, l.pid, l.host, l.incarnation, l.started_at, l.stopped_at, l.stop_reason, l.answers_waiting,
           l.slots, l.slots_in_use,
           CASE WHEN julianday(l.paused_until) > julianday('now') THEN l.paused_until END AS paused_until
    FROM lanes l
);

-- queue_state: one row: the queue's head (its first job in claim order),
-- the lanes that could claim it, and the head's next action. job_board
-- gives that action to the head, and to every queued job when nothing
-- will claim (stuck: no live lane, or a live idle lane that does not
-- claim); job_overview gives it to the queued row.
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
               || ', queued ' || CASE WHEN q.head_age_s < 60 THEN printf('%ds', q.head_age_s)
                                      WHEN q.head_age_s < 3600 THEN printf('%dm%02ds', q.head_age_s / 60, q.head_age_s % 60)
                                      WHEN q.head_age_s < 86400 THEN printf('%dh%02dm', q.head_age_s / 3600, q.head_age_s % 3600 / 60)
                                      ELSE printf('%dd%02dh', q.head_age_s / 86400, q.head_age_s % 86400 / 3600) END
               || ': read that lane''s log (database errors?) and restart it'
           ELSE
               'wait: lane ' || COALESCE(q.idle_lane, q.live_lane) || ' claims next'
               || CASE WHEN q.idle_lane IS NULL THEN ', when its running job ends' ELSE '' END
       END AS head_action,
       q.live_lane IS NULL OR (q.idle_lane IS NOT NULL AND q.head_age_s > q.stall_s) AS stuck
FROM (
    SELECT
        (SELECT MIN(lane) FROM lane_liveness WHERE alive = 1 AND running_jobs = 0) AS idle_lane,
        (SELECT MIN(lane) FROM lane_liveness WHERE alive = 1) AS live_lane,
        (SELECT group_concat(lane || ' ' || state || ' ' || heartbeat_age, ', ') FROM (SELECT * FROM lane_liveness ORDER BY lane)) AS lanes_seen,
        (SELECT value FROM overview_settings WHERE name = 'claim_stall_seconds') AS stall_s,
        h.id AS head_id,
        CAST(MAX(0, ROUND((julianday('now') - julianday(COALESCE(h.queued_at, h.created_at))) * 86400.0)) AS INTEGER) AS head_age_s,
        -- The 1000th queued job in claim order: job_board counts the place
        -- of a job up to it on the index (cheap near the head) and numbers
        -- the rest once per statement (see job_board).
        (SELECT id FROM jobs WHERE status = 'queued' ORDER BY id LIMIT 1 OFFSET 999) AS counted_to
    FROM (SELECT 1) LEFT JOIN (SELECT id, queued_at, created_at FROM jobs WHERE status = 'queued' ORDER BY id LIMIT 1) h
) q;

-- job_board: every job that is not done, with its own next safe action:
-- running jobs first, then queued in claim order, then failed. since is
-- when the job entered its status: accepted (or, for a retried job, no
-- earlier than its last attempt's end: queued_at), started, or failed.
-- A queued job's place ("N queued ahead": claims go in id order) is
-- counted on the jobs_queued index for the first 1000 jobs, and read from
-- ranks, numbered once per statement, beyond them: so a reader that picks
-- its rows by id (WHERE id IN …, as the store's Board does for the
-- dashboard and inkwell status) reads only those rows, and one that reads
-- every row reads each once.
CREATE VIEW job_board AS
WITH
ranks AS MATERIALIZED (
    SELECT id, ROW_NUMBER() OVER (ORDER BY id) - 1 AS ahead FROM jobs WHERE status = 'queued'
),
open_jobs AS (
    -- One branch per status, so each reads its partial index and none
    -- scans the done history.
    SELECT id, 'running' AS status, lane, error, julianday(started_at) AS since_jd FROM jobs WHERE status = 'running'
    UNION ALL
    SELECT id, 'queued', lane, error, julianday(COALESCE(queued_at, created_at)) FROM jobs WHERE status = 'queued'
    UNION ALL
    SELECT id, 'failed', lane, error, julianday(finished_at) FROM jobs WHERE status = 'failed'
),
aged AS (
    SELECT o.*, CAST(MAX(0, ROUND((julianday('now') - o.since_jd) * 86400.0)) AS INTEGER) AS age_s
    FROM open_jobs o
)
SELECT b.id, b.status, b.lane,
       COALESCE((SELECT MAX(a.attempt_number) FROM job_attempts a WHERE a.job_id = b.id), 0) AS attempt,
       strftime('%Y-%m-%d %H:%M:%S', b.since_jd) AS since,
       b.age_s AS age_seconds,
       CASE WHEN b.age_s IS NULL THEN NULL
            WHEN b.age_s < 60 THEN printf('%ds', b.age_s)
            WHEN b.age_s < 3600 THEN printf('%dm%02ds', b.age_s / 60, b.age_s % 60)
            WHEN b.age_s < 86400 THEN printf('%dh%02dm', b.age_s / 3600, b.age_s % 3600 / 60)
            ELSE printf('%dd%02dh', b.age_s / 86400, b.age_s % 86400 / 3600) END AS age,
       b.error,
       CASE
           WHEN b.status = 'queued' AND (q.stuck OR b.id = q.head_id) THEN q.head_action
           WHEN b.status = 'queued' THEN
               'wait: '
               || CASE WHEN q.counted_to IS NULL OR b.id <= q.counted_to
                       THEN (SELECT COUNT(*) FROM jobs a WHERE a.status = 'queued' AND a.id < b.id)
                       ELSE (SELECT r.ahead FROM ranks r WHERE r.id = b.id) END
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
                       WHEN ll.alive = 1 THEN
                           'wait: running on live lane ' || b.lane || ' (attempt '
                           || (SELECT MAX(a.attempt_number) FROM job_attempts a WHERE a.job_id = b.id)
                           || ', heartbeat ' || ll.heartbeat_age || ' ago)'
                       WHEN b.lane IS NULL THEN
                           'restart any lane: its startup recovery closes these as failed (a legacy running job with no lane; inkwell serve)'
                       -- A silent lane may be dead, or alive but stopped or hung:
                       -- SQLite cannot see the flock, so the words cover both.
                       WHEN ll.state = 'silent' THEN
                           'lane ' || b.lane || ' silent for ' || ll.heartbeat_age || ' (pid ' || ll.pid || ' on host ' || ll.host || '): '
                           || 'if that process still runs it holds the lane (stopped or hung?): inspect it (ps -o pid,stat,cmd -p ' || ll.pid || '); '
                           || 'ending it lets recovery close its attempts; if it is gone, restart the lane: inkwell serve --lane ' || b.lane
                       ELSE
                           'restart that lane: its startup recovery closes these as failed (lane ' || b.lane || ' '
                           || COALESCE(ll.state || ', last heartbeat ' || ll.heartbeat_age || ' ago', 'never registered')
                           || '; inkwell serve --lane ' || b.lane || ')'
                   END
               FROM (SELECT 1) LEFT JOIN lane_liveness ll ON ll.lane = b.lane)
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
FROM aged b
CROSS JOIN queue_state q
ORDER BY CASE b.status WHEN 'running' THEN 1 WHEN 'queued' THEN 2 ELSE 3 END, b.id;

-- job_overview: exactly four rows, queued, running, failed, done, zero
-- counts included. oldest_job_id and oldest_age name the job longest in
-- that status (done names none). Counts come from job_counts; the oldest
-- of each status is one probe of its index; the queue's action is its
-- head's (queue_state); the running row reads the few
-- running jobs, by lane.
CREATE VIEW job_overview AS
WITH
k AS (
    SELECT
        COALESCE(SUM(CASE WHEN kind = 'queued' THEN n END), 0) AS queued,
        COALESCE(SUM(CASE WHEN kind = 'running' THEN n END), 0) AS running,
        COALESCE(SUM(CASE WHEN kind = 'failed_refused' THEN n END), 0) AS refused,
        COALESCE(SUM(CASE WHEN kind = 'failed_restarted' THEN n END), 0) AS restarted,
        COALESCE(SUM(CASE WHEN kind = 'failed_after_call' THEN n END), 0) AS after_call,
        COALESCE(SUM(CASE WHEN kind = 'failed_other' THEN n END), 0) AS failed_other,
        COALESCE(SUM(CASE WHEN kind = 'done' THEN n END), 0) AS done,
        COALESCE(SUM(CASE WHEN kind = 'done_adopted' THEN n END), 0) AS adopted,
        COALESCE(SUM(CASE WHEN kind = 'results' THEN n END), 0) AS results,
        COALESCE(SUM(CASE WHEN kind = 'charges' THEN n END), 0) AS charges
    FROM job_counts
),
oldest AS (
    SELECT 'queued' AS status, id, COALESCE(queued_at, created_at) AS since FROM (
        SELECT id, queued_at, created_at FROM jobs
        WHERE status = 'queued' AND COALESCE(queued_at, created_at) IS NOT NULL
        ORDER BY COALESCE(queued_at, created_at), id LIMIT 1)
    UNION ALL
    SELECT 'running', id, started_at FROM (
        SELECT id, started_at FROM jobs WHERE status = 'running' AND started_at IS NOT NULL ORDER BY started_at, id LIMIT 1)
    UNION ALL
    SELECT 'failed', id, finished_at FROM (
        SELECT id, finished_at FROM jobs WHERE status = 'failed' AND finished_at IS NOT NULL ORDER BY finished_at, id LIMIT 1)
    UNION ALL
    SELECT 'done', NULL, finished_at FROM (
        SELECT finished_at FROM jobs WHERE status = 'done' AND finished_at IS NOT NULL ORDER BY finished_at LIMIT 1)
),
counted AS (
    SELECT s.status, s.ord, s.jobs, o.id AS oldest_job_id,
           CAST(MAX(0, ROUND((julianday('now') - julianday(o.since)) * 86400.0)) AS INTEGER) AS oldest_age_seconds
    FROM (
        SELECT 'queued' AS status, 1 AS ord, queued AS jobs FROM k
        UNION ALL SELECT 'running', 2, running FROM k
        UNION ALL SELECT 'failed', 3, refused + restarted + after_call + failed_other FROM k
        UNION ALL SELECT 'done', 4, done + adopted FROM k
    ) s
    LEFT JOIN oldest o ON o.status = s.status
),
first_failed AS (
    SELECT id, error LIKE 'provider: provider call: client error:%' AS refused
    FROM jobs WHERE status = 'failed' ORDER BY id LIMIT 1
),
running_lanes AS (
    SELECT j.lane, COUNT(*) AS n, COALESCE(ll.alive, 0) AS alive, ll.state, ll.heartbeat_age, ll.pid, ll.host,
           -- a live lane as operators read it: "east (12 of 16 slots)", and
           -- when a provider's 429 holds its calls, until when
           j.lane || ' (' || COUNT(*) || ' of ' || COALESCE(ll.slots, 1) || ' slots'
           || COALESCE(', paused by the provider''s 429 until ' || ll.paused_until, '') || ')' AS seen_live
    FROM jobs j LEFT JOIN lane_liveness ll ON ll.lane = j.lane
    WHERE j.status = 'running'
    GROUP BY j.lane
),
running_summary AS (
    SELECT
        (SELECT group_concat('answer waiting to be stored: lane ' || lane || ' holds ' || answers_waiting || ' provider answer'
                             || CASE WHEN answers_waiting > 1 THEN 's' ELSE '' END
                             || ' the database has not taken yet (busy, locked or full?): free the database (a long transaction in another process? disk full?); '
                             || 'do not restart lane ' || lane || ', a restart loses those answers', '; ')
         FROM (SELECT lane, answers_waiting FROM lane_liveness WHERE answers_waiting > 0 AND state <> 'stopped' ORDER BY lane)) AS answers,
        (SELECT group_concat('lane ' || lane || ' silent for ' || heartbeat_age || ' (pid ' || pid || ' on host ' || host || '): '
                             || 'if that process still runs it holds the lane (stopped or hung?): inspect it (ps -o pid,stat,cmd -p ' || pid || '); '
                             || 'ending it lets recovery close its attempts; if it is gone, restart the lane: inkwell serve --lane ' || lane, '; ')
         FROM (SELECT * FROM running_lanes WHERE state = 'silent' AND lane IS NOT NULL ORDER BY lane)) AS silent,
        (SELECT group_concat(n || ' on lane ' || COALESCE(lane, '(none: legacy)') || ' '
                             || COALESCE(state || ', last heartbeat ' || heartbeat_age || ' ago', 'never registered'), '; ')
         FROM (SELECT * FROM running_lanes WHERE alive = 0 AND (state IS NOT 'silent' OR lane IS NULL) ORDER BY lane)) AS dead,
        (SELECT SUM(n) FROM running_lanes WHERE alive = 1) AS live_n,
        (SELECT group_concat(seen_live, ', ') FROM (SELECT seen_live FROM running_lanes WHERE alive = 1 ORDER BY lane)) AS live_lanes
)
SELECT c.status, c.jobs, c.oldest_job_id, c.oldest_age_seconds,
       CASE WHEN c.oldest_age_seconds IS NULL THEN NULL
            WHEN c.oldest_age_seconds < 60 THEN printf('%ds', c.oldest_age_seconds)
            WHEN c.oldest_age_seconds < 3600 THEN printf('%dm%02ds', c.oldest_age_seconds / 60, c.oldest_age_seconds % 60)
            WHEN c.oldest_age_seconds < 86400 THEN printf('%dh%02dm', c.oldest_age_seconds / 3600, c.oldest_age_seconds % 3600 / 60)
            ELSE printf('%dd%02dh', c.oldest_age_seconds / 86400, c.oldest_age_seconds % 86400 / 3600) END AS oldest_age,
       CASE
           -- A lane holding answers the database has not taken comes first:
           -- restarting it (what a silent lane would otherwise ask) loses them.
           WHEN c.status = 'running' AND r.answers IS NOT NULL THEN
               r.answers || '; '
               || CASE WHEN c.jobs = 0 THEN 'nothing running'
                       ELSE substr(COALESCE('; ' || r.silent, '')
                                   || COALESCE('; restart that lane: its startup recovery closes these as failed (' || r.dead || ')', '')
                                   || CASE WHEN r.silent IS NULL AND r.dead IS NULL THEN '; wait: running on live lane ' || r.live_lanes
                                           WHEN r.live_n > 0 THEN '; ' || r.live_n || ' more on live lane ' || r.live_lanes || ': wait'
                                           ELSE '' END, 3) END
           WHEN c.jobs = 0 AND c.status = 'queued' THEN 'nothing queued'
           WHEN c.jobs = 0 AND c.status = 'running' THEN 'nothing running'
           WHEN c.jobs = 0 AND c.status = 'failed' THEN 'nothing to retry'
           WHEN c.status = 'done' AND k.done - MIN(k.results, k.charges) > 0 THEN (
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
           WHEN c.status = 'running' THEN
               substr(COALESCE('; ' || r.silent, '')
                      || COALESCE('; restart that lane: its startup recovery closes these as failed (' || r.dead || ')', '')
                      || CASE WHEN r.silent IS NULL AND r.dead IS NULL THEN '; wait: running on live lane ' || r.live_lanes
                              WHEN r.live_n > 0 THEN '; ' || r.live_n || ' more on live lane ' || r.live_lanes || ': wait'
                              ELSE '' END, 3)
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
CROSS JOIN running_summary r
LEFT JOIN first_failed f ON c.status = 'failed'
ORDER BY c.ord;
