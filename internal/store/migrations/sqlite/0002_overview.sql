-- Operator views, SQLite dialect. Type in the sqlite3 shell:
--
--   SELECT * FROM job_overview;   -- one row per status, with the next safe action
--   SELECT * FROM job_board;      -- every job that is not done, with its own
--   SELECT * FROM lane_liveness;  -- every lane: alive, silent or stopped
--
-- Every action is computed from evidence in the database at the moment of
-- the query: lane heartbeats against the wall clock, attempt errors and job
-- states. Silence is never reported as waiting: a queue with no live lane
-- says so, and so does a live lane that sits idle beside a queued job.
--
-- Times are TEXT ('YYYY-MM-DDTHH:MM:SS.ffffffZ', or 'YYYY-MM-DD HH:MM:SS' on
-- legacy rows); julianday() reads both, so every age is computed on
-- julianday and never by comparing text. Ages are whole seconds; the
-- readable form ('42s', '3m07s', '2h05m', '4d03h') is the same CASE in each
-- view, because a view cannot call a function of its own.

-- The thresholds live here and nowhere else. Operators may tune them:
--   UPDATE overview_settings SET value = 30 WHERE name = 'lane_silence_seconds';
-- Do not delete a row: without it no lane counts as alive.
CREATE TABLE overview_settings (
    name    TEXT PRIMARY KEY,
    value   REAL NOT NULL CHECK (value > 0),
    meaning TEXT NOT NULL
);
INSERT INTO overview_settings (name, value, meaning) VALUES
    ('lane_silence_seconds', 15,
     'a lane whose last heartbeat is older than this is not alive; lanes beat every 2 s by default (serve --heartbeat), so 15 s is seven missed beats: keep it at five beats or more'),
    ('claim_stall_seconds', 30,
     'a live lane with nothing running, beside a job queued longer than this, is stuck rather than about to claim (an idle lane polls every 1 s and is woken at once by a new job)');

-- lane_liveness: one row per lane. state is 'alive' (not stopped, heartbeat
-- no older than lane_silence_seconds), 'silent' (heartbeat too old: the
-- process is dead, hung or cut off) or 'stopped' (a clean shutdown was
-- recorded). A heartbeat from a clock ahead of this one counts as fresh.
-- Liveness is for display; the lane lock alone decides a holder is dead.
CREATE VIEW lane_liveness AS
SELECT lane, state,
       CASE state WHEN 'alive' THEN 1 ELSE 0 END AS alive,
       age_s AS heartbeat_age_seconds,
       CASE WHEN age_s < 60 THEN printf('%ds', age_s)
            WHEN age_s < 3600 THEN printf('%dm%02ds', age_s / 60, age_s % 60)
            WHEN age_s < 86400 THEN printf('%dh%02dm', age_s / 3600, age_s % 3600 / 60)
            ELSE printf('%dd%02dh', age_s / 86400, age_s % 86400 / 3600) END AS heartbeat_age,
       running_jobs, heartbeat_at, pid, host, incarnation, started_at, stopped_at, stop_reason
FROM (
    SELECT l.name AS lane,
           CASE WHEN l.stopped_at IS NOT NULL THEN 'stopped'
                WHEN (julianday('now') - julianday(l.heartbeat_at)) * 86400.0
                     <= (SELECT value FROM overview_settings WHERE name = 'lane_silence_seconds') THEN 'alive'
                ELSE 'silent' END AS state,
           CAST(MAX(0, ROUND((julianday('now') - julianday(l.heartbeat_at)) * 86400.0)) AS INTEGER) AS age_s,
           (SELECT COUNT(*) FROM jobs j WHERE j.status = 'running' AND j.lane = l.name) AS running_jobs,
           l.heartbeat_at, l.pid, l.host, l.incarnation, l.started_at, l.stopped_at, l.stop_reason
    FROM lanes l
);

-- job_board: every job that is not done, with its own next safe action.
-- since is when the job entered its status: accepted (or, for a retried
-- job, no earlier than its last attempt's end), started, or failed.
-- ahead counts the queued jobs a lane claims before this one (claims go
-- in id order).
CREATE VIEW job_board AS
WITH
open_jobs AS (
    -- One branch per status, so each reads its partial index and none
    -- scans the done history.
    SELECT id, status, lane, error, created_at, started_at, finished_at FROM jobs WHERE status = 'queued'
    UNION ALL
    SELECT id, status, lane, error, created_at, started_at, finished_at FROM jobs WHERE status = 'running'
    UNION ALL
    SELECT id, status, lane, error, created_at, started_at, finished_at FROM jobs WHERE status = 'failed'
),
dated AS (
    SELECT o.*,
           (SELECT MAX(a.attempt_number) FROM job_attempts a WHERE a.job_id = o.id) AS attempt,
           CASE o.status
               WHEN 'queued' THEN MAX(julianday(o.created_at),
                   COALESCE((SELECT MAX(julianday(a.finished_at)) FROM job_attempts a WHERE a.job_id = o.id), julianday(o.created_at)))
               WHEN 'running' THEN julianday(o.started_at)
               ELSE julianday(o.finished_at) END AS since_jd,
           CASE WHEN o.status = 'queued' THEN ROW_NUMBER() OVER (PARTITION BY o.status ORDER BY o.id) - 1 END AS ahead
    FROM open_jobs o
),
aged AS (
    SELECT d.*, CAST(MAX(0, ROUND((julianday('now') - d.since_jd) * 86400.0)) AS INTEGER) AS age_s
    FROM dated d
),
board AS MATERIALIZED (
    SELECT a.*,
           CASE WHEN a.age_s IS NULL THEN NULL
                WHEN a.age_s < 60 THEN printf('%ds', a.age_s)
                WHEN a.age_s < 3600 THEN printf('%dm%02ds', a.age_s / 60, a.age_s % 60)
                WHEN a.age_s < 86400 THEN printf('%dh%02dm', a.age_s / 3600, a.age_s % 3600 / 60)
                ELSE printf('%dd%02dh', a.age_s / 86400, a.age_s % 86400 / 3600) END AS age_text
    FROM aged a
),
queue AS (
    SELECT
        (SELECT MIN(lane) FROM lane_liveness WHERE alive = 1 AND running_jobs = 0) AS idle_lane,
        (SELECT MIN(lane) FROM lane_liveness WHERE alive = 1) AS live_lane,
        (SELECT group_concat(lane || ' ' || state || ' ' || heartbeat_age, ', ') FROM lane_liveness) AS lanes_seen,
        (SELECT value FROM overview_settings WHERE name = 'claim_stall_seconds') AS stall_s,
        (SELECT id FROM board WHERE status = 'queued' AND ahead = 0) AS head_id,
        (SELECT age_s FROM board WHERE status = 'queued' AND ahead = 0) AS head_age_s,
        (SELECT age_text FROM board WHERE status = 'queued' AND ahead = 0) AS head_age
)
SELECT b.id, b.status, b.lane,
       COALESCE(b.attempt, 0) AS attempt,
       strftime('%Y-%m-%d %H:%M:%S', b.since_jd) AS since,
       b.age_s AS age_seconds,
       b.age_text AS age,
       b.error,
       CASE
           WHEN b.status = 'queued' AND q.live_lane IS NULL THEN
               'no live worker lane: start inkwell serve'
               || CASE WHEN q.lanes_seen IS NULL THEN ' (no lane has ever registered)'
                       ELSE ' (last seen: ' || q.lanes_seen || ')' END
           WHEN b.status = 'queued' AND q.idle_lane IS NOT NULL AND q.head_age_s > q.stall_s THEN
               'not moving: lane ' || q.idle_lane || ' is alive and idle but has not claimed job ' || q.head_id
               || ', queued ' || q.head_age || ': read that lane''s log (database errors?) and restart it'
           WHEN b.status = 'queued' AND b.ahead = 0 THEN
               'wait: lane ' || COALESCE(q.idle_lane, q.live_lane) || ' claims next'
               || CASE WHEN q.idle_lane IS NULL THEN ', when its running job ends' ELSE '' END
           WHEN b.status = 'queued' THEN
               'wait: ' || b.ahead || ' queued ahead; live lanes claim in id order'
           WHEN b.status = 'running' AND ll.alive = 1 THEN
               'wait: running on live lane ' || b.lane || ' (attempt ' || b.attempt || ', heartbeat ' || ll.heartbeat_age || ' ago)'
           WHEN b.status = 'running' AND b.lane IS NULL THEN
               'restart any lane: its startup recovery closes these as failed (a legacy running job with no lane; inkwell serve)'
           WHEN b.status = 'running' THEN
               'restart that lane: its startup recovery closes these as failed (lane ' || b.lane || ' '
               || COALESCE(ll.state || ', last heartbeat ' || ll.heartbeat_age || ' ago', 'never registered')
               || '; inkwell serve --lane ' || b.lane || ')'
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
FROM board b
CROSS JOIN queue q
LEFT JOIN lane_liveness ll ON ll.lane = b.lane AND b.status = 'running'
ORDER BY CASE b.status WHEN 'running' THEN 1 WHEN 'queued' THEN 2 ELSE 3 END, b.id;

-- job_overview: exactly four rows, queued, running, failed, done, zero
-- counts included. oldest_job_id and oldest_age name the job longest in
-- that status. The board is read once (MATERIALIZED) and ranked, never
-- re-scanned per row.
CREATE VIEW job_overview AS
WITH
statuses (status, ord) AS (VALUES ('queued', 1), ('running', 2), ('failed', 3), ('done', 4)),
board AS MATERIALIZED (SELECT * FROM job_board),
ranked AS (
    SELECT b.*,
           b.error LIKE 'provider: provider call: client error:%' AS refused,
           ROW_NUMBER() OVER (PARTITION BY status ORDER BY age_seconds DESC NULLS LAST, id) AS age_rank,
           ROW_NUMBER() OVER (PARTITION BY status ORDER BY id) AS id_rank
    FROM board b
),
open_counts AS (
    SELECT status, COUNT(*) AS jobs,
           MAX(CASE WHEN age_rank = 1 THEN id END) AS oldest_job_id,
           MAX(age_seconds) AS oldest_age_seconds,
           MIN(id) AS first_id,
           MAX(CASE WHEN id_rank = 1 THEN next_action END) AS first_action,
           MAX(CASE WHEN id_rank = 1 THEN refused END) AS first_refused,
           SUM(CASE WHEN refused THEN 1 ELSE 0 END) AS refused,
           SUM(CASE WHEN error = 'worker restarted' THEN 1 ELSE 0 END) AS restarted,
           SUM(CASE WHEN refused THEN 0
                    WHEN error = 'worker restarted' OR error LIKE 'provider:%' OR error LIKE 'shutdown:%' THEN 1 ELSE 0 END) AS after_call
    FROM ranked GROUP BY status
),
done_counts AS (
    -- One pass over the done history. adopted counts the done rows taken
    -- over from a legacy database and never run by Inkwell (key hash
    -- 'legacy', store.LegacyRequestHash, and no lane: a claim sets one).
    -- They are kept as they were, with no result or charge (DESIGN §7).
    -- MIN on the text, then one julianday: text order is time order
    -- within each format, and every legacy row (' ' sorts before 'T') was
    -- written before any row of Inkwell's own.
    SELECT 'done' AS status, COUNT(*) AS jobs,
           CAST(MAX(0, ROUND((julianday('now') - julianday(MIN(finished_at))) * 86400.0)) AS INTEGER) AS oldest_age_seconds,
           SUM(CASE WHEN request_hash = 'legacy' AND lane IS NULL THEN 1 ELSE 0 END) AS adopted
    FROM jobs WHERE status = 'done'
),
done_checked AS (
    -- Every other done job must have its result and charge. Both are
    -- unique per job and written only by Complete, with the job's done,
    -- which is final: so none lacks one exactly when there are as many
    -- results, and as many charges, as such jobs. Counting is cheap;
    -- finding the job that lacks one is not, and the final CASE does it
    -- only when bare says there is one.
    SELECT d.*, d.jobs - d.adopted - MIN((SELECT COUNT(*) FROM results), (SELECT COUNT(*) FROM charges)) AS bare
    FROM done_counts d
),
running_lanes AS (
    SELECT j.lane, COUNT(*) AS n, COALESCE(ll.alive, 0) AS alive,
           COALESCE(ll.state || ', last heartbeat ' || ll.heartbeat_age || ' ago', 'never registered') AS seen
    FROM jobs j LEFT JOIN lane_liveness ll ON ll.lane = j.lane
    WHERE j.status = 'running'
    GROUP BY j.lane, ll.alive, ll.state, ll.heartbeat_age
),
running_summary AS (
    SELECT
        (SELECT group_concat(n || ' on lane ' || COALESCE(lane, '(none: legacy)') || ' ' || seen, '; ') FROM running_lanes WHERE alive = 0) AS dead,
        (SELECT SUM(n) FROM running_lanes WHERE alive = 1) AS live_n,
        (SELECT group_concat(lane, ', ') FROM running_lanes WHERE alive = 1) AS live_lanes
),
counted AS (
    SELECT s.status, s.ord,
           COALESCE(o.jobs, d.jobs, 0) AS jobs,
           o.oldest_job_id,
           COALESCE(o.oldest_age_seconds, d.oldest_age_seconds) AS oldest_age_seconds,
           o.first_id, o.first_action, o.first_refused,
           COALESCE(o.refused, 0) AS refused,
           COALESCE(o.restarted, 0) AS restarted,
           COALESCE(o.after_call, 0) AS after_call,
           COALESCE(d.adopted, 0) AS adopted,
           COALESCE(d.bare, 0) AS bare
    FROM statuses s
    LEFT JOIN open_counts o ON o.status = s.status
    LEFT JOIN done_checked d ON d.status = s.status
)
SELECT c.status, c.jobs, c.oldest_job_id, c.oldest_age_seconds,
       CASE WHEN c.oldest_age_seconds IS NULL THEN NULL
            WHEN c.oldest_age_seconds < 60 THEN printf('%ds', c.oldest_age_seconds)
            WHEN c.oldest_age_seconds < 3600 THEN printf('%dm%02ds', c.oldest_age_seconds / 60, c.oldest_age_seconds % 60)
            WHEN c.oldest_age_seconds < 86400 THEN printf('%dh%02dm', c.oldest_age_seconds / 3600, c.oldest_age_seconds % 3600 / 60)
            ELSE printf('%dd%02dh', c.oldest_age_seconds / 86400, c.oldest_age_seconds % 86400 / 3600) END AS oldest_age,
       CASE
           WHEN c.jobs = 0 AND c.status = 'queued' THEN 'nothing queued'
           WHEN c.jobs = 0 AND c.status = 'running' THEN 'nothing running'
           WHEN c.jobs = 0 AND c.status = 'failed' THEN 'nothing to retry'
           WHEN c.status = 'done' AND c.bare > 0 THEN (
               SELECT 'inspect job ' || MIN(j.id) || ' (inkwell show ' || MIN(j.id) || '): done without its result or charge, '
                      || 'which breaks an invariant; nothing rewrites it'
               FROM jobs j
               WHERE j.status = 'done' AND NOT (j.request_hash = 'legacy' AND j.lane IS NULL)
                 AND (NOT EXISTS (SELECT 1 FROM results r WHERE r.job_id = j.id)
                      OR NOT EXISTS (SELECT 1 FROM charges ch WHERE ch.job_id = j.id)))
           WHEN c.status = 'done' AND c.adopted > 0 AND c.adopted = c.jobs THEN
               'nothing to do: adopted from a legacy database as they were (the old Inkwell kept no result or charge)'
           WHEN c.status = 'done' AND c.adopted > 0 THEN
               'nothing to do: each has its result and charge, but for ' || c.adopted
               || ' adopted from a legacy database as they were (the old Inkwell kept no result or charge)'
           WHEN c.status = 'done' THEN 'nothing to do: each has its result and charge'
           -- The queue moves in id order: its head's action is the queue's.
           WHEN c.status = 'queued' THEN c.first_action
           WHEN c.status = 'running' AND r.dead IS NOT NULL THEN
               'restart that lane: its startup recovery closes these as failed (' || r.dead || ')'
               || CASE WHEN r.live_n > 0 THEN '; ' || r.live_n || ' more on live lane ' || r.live_lanes || ': wait' ELSE '' END
           WHEN c.status = 'running' THEN
               'wait: running on live lane ' || r.live_lanes
           ELSE
               'inspect the error'
               || CASE WHEN c.first_refused THEN ' and fix its cause' ELSE '' END
               || ', then inkwell retry ' || c.first_id
               || CASE WHEN c.jobs > 1 THEN ' (and ' || (c.jobs - 1) || ' more: SELECT * FROM job_board)' ELSE '' END
               || CASE WHEN c.refused > 0 THEN
                      '; ' || c.refused || ' refused by the provider (HTTP 4xx): fix the API key, the model or the request first, or the retry fails the same way'
                  ELSE '' END
               || CASE WHEN c.after_call > 0 THEN
                      '; ' || c.after_call || ' failed after the provider call had begun'
                      || CASE WHEN c.restarted > 0 THEN ' (' || c.restarted || ' by a worker restart: the provider may already have billed them)' ELSE '' END
                      || ': the retry reuses the job''s provider key, so the provider answers from its record'
                  ELSE '' END
       END AS next_action
FROM counted c
CROSS JOIN running_summary r
ORDER BY c.ord;
