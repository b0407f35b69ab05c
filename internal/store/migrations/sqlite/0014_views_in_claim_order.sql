-- Operator views in claim order, SQLite dialect. Since 0013 a lane claims
-- by turn (store/claim_fair.go): ready queued jobs in (claim_turn, id)
-- order, round robin across accounts, and a retried or rescheduled job
-- gets a late turn, so an old id can sit at the back of the queue. The
-- views of 0006 still read the queue in id order: their head (and with it
-- head age and "stuck") was the oldest ready id, which with turns can be
-- a retried job waiting behind others (a false "not moving"); "N queued
-- ahead" counted the smaller ids; the text said lanes claim in id order.
-- 0014 recreates queue_state, job_board and job_overview (dependents
-- first, as 0006 does) with their bodies as in 0006 but for that:
--
--   * queue_state's head is the first ready queued job in (claim_turn, id)
--     order, one probe of jobs_queued_turn; counted_to is the 1000th
--     queued job in that order, with its turn (counted_to_turn).
--   * job_board counts "N queued ahead" in (claim_turn, id) order, two
--     ranges of jobs_queued_turn near the head, ranks beyond; it
--     lists queued jobs in that order and shows their claim_turn (a new
--     last column, NULL for jobs that are not queued) so that a reader
--     (the store's Board) can order its rows as the view does. Its words:
--     "wait: N queued ahead; live lanes claim round robin across accounts".
--   * job_overview: the same, but for its words on the claim order.
--
-- failed_job_action is unchanged. Nothing reads jobs_queued (jobs (id)
-- WHERE status = 'queued', 0001) any more: every claim, accept and retry
-- paid for its upkeep, so it goes.

DROP VIEW job_overview;
DROP VIEW job_board;
DROP VIEW queue_state;
DROP INDEX jobs_queued;

-- queue_state: one row: the queue's head (the first job a claim would
-- take: in claim order, (claim_turn, id), not waiting out a back-off;
-- an old id retried or rescheduled has a late turn and is not the head
-- until the turns before it are claimed), the lanes that could
-- claim it, the jobs waiting for their back-off, and the head's next
-- action. job_board gives that action to the head, and to every queued
-- job when nothing will claim (stuck: no live lane, or a live idle lane
-- that does not claim); job_overview gives it to the queued row. now_text
-- is the database's clock in the layout Inkwell stores times in, so that
-- not_before compares as text, on its index.
CREATE VIEW queue_state AS
SELECT q.*,
       CASE
           WHEN q.head_id IS NULL AND q.waiting = 0 THEN NULL
           WHEN q.live_lane IS NULL THEN
               'no live worker lane: start inkwell serve'
               || CASE WHEN q.lanes_seen IS NULL THEN ' (no lane has ever registered)'
                       ELSE ' (last seen: ' || q.lanes_seen || ')' END
           WHEN q.head_id IS NULL THEN NULL
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
       q.live_lane IS NULL OR (q.idle_lane IS NOT NULL AND COALESCE(q.head_age_s > q.stall_s, 0)) AS stuck,
       CASE WHEN q.waiting > 0 THEN
           q.waiting || ' waiting for back-off, next at ' || strftime('%Y-%m-%dT%H:%M:%SZ', q.next_at)
       END AS waiting_text
FROM (
    SELECT
        (SELECT MIN(lane) FROM lane_liveness WHERE alive = 1 AND running_jobs = 0) AS idle_lane,
        (SELECT MIN(lane) FROM lane_liveness WHERE alive = 1) AS live_lane,
        (SELECT group_concat(lane || ' ' || state || ' ' || heartbeat_age, ', ') FROM (SELECT * FROM lane_liveness ORDER BY lane)) AS lanes_seen,
        (SELECT value FROM overview_settings WHERE name = 'claim_stall_seconds') AS stall_s,
        h.id AS head_id,
        -- A job that waited out a back-off has been claimable since its
        -- not_before, not since it went back to queued.
        CAST(MAX(0, ROUND((julianday('now') - julianday(MAX(COALESCE(h.queued_at, h.created_at), COALESCE(h.not_before, ''))))
                          * 86400.0)) AS INTEGER) AS head_age_s,
        -- The 1000th queued job in claim order, (claim_turn, id): job_board
        -- counts the place of a job up to it on the index (cheap near the
        -- head) and numbers the rest once per statement (see job_board).
        c.id AS counted_to,
        c.claim_turn AS counted_to_turn,
        (SELECT COUNT(*) FROM jobs WHERE status = 'queued' AND not_before > n.now_text) AS waiting,
        (SELECT MIN(not_before) FROM jobs WHERE status = 'queued' AND not_before > n.now_text) AS next_at,
        n.now_text
    FROM (SELECT strftime('%Y-%m-%dT%H:%M:%f000Z', 'now') AS now_text) n
    LEFT JOIN (SELECT id, queued_at, created_at, not_before FROM jobs
               WHERE status = 'queued' AND (not_before IS NULL OR not_before <= strftime('%Y-%m-%dT%H:%M:%f000Z', 'now'))
               ORDER BY claim_turn, id LIMIT 1) h
    LEFT JOIN (SELECT claim_turn, id FROM jobs WHERE status = 'queued' ORDER BY claim_turn, id LIMIT 1 OFFSET 999) c
) q;

-- job_board: every job that is not done, with its own next safe action:
-- running jobs first, then queued in claim order, then failed (those
-- retention pruned last: nothing is left to do with them). since is
-- when the job entered its status: accepted (or, for a retried job, no
-- earlier than its last attempt's end: queued_at), started, or failed.
-- A queued job's place ("N queued ahead": claims go in claim order,
-- (claim_turn, id), round robin across accounts; the count includes jobs
-- ahead that wait out a back-off, which are claimed first once it ends)
-- is counted on the jobs_queued_turn index (the earlier turns, then the
-- smaller ids of its own turn: two ranges) for the first 1000 jobs, and read from ranks, numbered once per statement,
-- beyond them: so a reader that picks its rows by id (WHERE id IN …, as
-- the store's Board does for the dashboard and inkwell status) reads only
-- those rows, and one that reads every row reads each once. claim_turn is
-- a queued job's turn (NULL for the others): the board's order is
-- status, then claim_turn, then id. A failed job's action is its
-- class's, except for a pruned job (nothing to retry), a cancelled one
-- (nothing to do; its last attempt says whether its call was in flight),
-- one automatic retry gave up on, and a possible poison job (its last two
-- attempts both ended worker_restarted).
CREATE VIEW job_board AS
WITH
ranks AS MATERIALIZED (
    SELECT id, ROW_NUMBER() OVER (ORDER BY claim_turn, id) - 1 AS ahead FROM jobs WHERE status = 'queued'
),
open_jobs AS (
    -- One branch per status, so each reads its partial index and none
    -- scans the done history.
    SELECT id, 'running' AS status, lane, error, error_class, not_before, gave_up_after, pruned_at,
           julianday(started_at) AS since_jd, NULL AS claim_turn FROM jobs WHERE status = 'running'
    UNION ALL
    SELECT id, 'queued', lane, error, error_class, not_before, gave_up_after, pruned_at,
           julianday(COALESCE(queued_at, created_at)), claim_turn FROM jobs WHERE status = 'queued'
    UNION ALL
    SELECT id, 'failed', lane, error, error_class, not_before, gave_up_after, pruned_at,
           julianday(finished_at), NULL FROM jobs WHERE status = 'failed'
),
aged AS (
    SELECT o.*, CAST(MAX(0, ROUND((julianday('now') - o.since_jd) * 86400.0)) AS INTEGER) AS age_s,
           (SELECT MAX(a.attempt_number) FROM job_attempts a WHERE a.job_id = o.id) AS last_attempt
    FROM open_jobs o
)
SELECT b.id, b.status, b.lane,
       COALESCE(b.last_attempt, 0) AS attempt,
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
           WHEN b.status = 'queued' AND b.not_before > q.now_text THEN
               'wait: back-off after attempt ' || COALESCE(b.last_attempt, 0) || ' failed (' || COALESCE(b.error_class, 'legacy')
               || '): automatic retry, claimed from ' || strftime('%Y-%m-%dT%H:%M:%SZ', b.not_before)
           WHEN b.status = 'queued' THEN
               'wait: '
               || CASE WHEN q.counted_to IS NULL OR (b.claim_turn, b.id) <= (q.counted_to_turn, q.counted_to)
                       -- Two ranges of jobs_queued_turn: the earlier turns, then
                       -- the smaller ids of its own turn. As one row value,
                       -- (a.claim_turn, a.id) < (b.claim_turn, b.id), SQLite
                       -- bounds the range on claim_turn alone and reads the
                       -- whole of b's turn for each job it counts.
                       THEN (SELECT COUNT(*) FROM jobs a WHERE a.status = 'queued' AND a.claim_turn < b.claim_turn)
                            + (SELECT COUNT(*) FROM jobs a WHERE a.status = 'queued' AND a.claim_turn = b.claim_turn AND a.id < b.id)
                       ELSE (SELECT r.ahead FROM ranks r WHERE r.id = b.id) END
               || ' queued ahead; live lanes claim round robin across accounts'
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
                           || b.last_attempt
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
           ELSE (SELECT fa.next_action FROM failed_job_action fa WHERE fa.id = b.id)
       END AS next_action,
       b.error_class,
       b.pruned_at,
       b.claim_turn
FROM aged b
CROSS JOIN queue_state q
ORDER BY CASE b.status WHEN 'running' THEN 1 WHEN 'queued' THEN 2 ELSE CASE WHEN b.pruned_at IS NULL THEN 3 ELSE 4 END END, b.claim_turn, b.id;

-- job_overview: exactly four rows, queued, running, failed, done, zero
-- counts included. oldest_job_id and oldest_age name the job longest in
-- that status (done names none). Counts come from job_counts; the oldest
-- of each status is one probe of its index; the queue's action is its
-- head's (queue_state), with the jobs waiting for back-off; the running
-- row reads the few running jobs, by lane; the failed row leads with the
-- action of the first failed job that needs a person (the smallest id of
-- one probe per class on jobs_failed_open: a cancelled or pruned job needs
-- nobody), then says, per kind, how many and what to do.
CREATE VIEW job_overview AS
WITH
k AS (
    SELECT
        COALESCE(SUM(CASE WHEN kind = 'queued' THEN n END), 0) AS queued,
        COALESCE(SUM(CASE WHEN kind = 'running' THEN n END), 0) AS running,
        COALESCE(SUM(CASE WHEN kind = 'failed_not_sent' THEN n END), 0) AS f_not_sent,
        COALESCE(SUM(CASE WHEN kind = 'failed_rate_limited' THEN n END), 0) AS f_rate_limited,
        COALESCE(SUM(CASE WHEN kind = 'failed_provider_error' THEN n END), 0) AS f_provider_error,
        COALESCE(SUM(CASE WHEN kind = 'failed_rejected' THEN n END), 0) AS f_rejected,
        COALESCE(SUM(CASE WHEN kind = 'failed_malformed' THEN n END), 0) AS f_malformed,
        COALESCE(SUM(CASE WHEN kind = 'failed_unstorable' THEN n END), 0) AS f_unstorable,
        COALESCE(SUM(CASE WHEN kind = 'failed_timeout' THEN n END), 0) AS f_timeout,
        COALESCE(SUM(CASE WHEN kind = 'failed_shutdown' THEN n END), 0) AS f_shutdown,
        COALESCE(SUM(CASE WHEN kind = 'failed_worker_restarted' THEN n END), 0) AS f_restarted,
        COALESCE(SUM(CASE WHEN kind = 'failed_cancelled' THEN n END), 0) AS f_cancelled,
        COALESCE(SUM(CASE WHEN kind = 'failed_cancelled_running' THEN n END), 0) AS f_cancelled_running,
        COALESCE(SUM(CASE WHEN kind = 'failed_legacy' THEN n END), 0) AS f_legacy,
        COALESCE(SUM(CASE WHEN kind = 'failed_gave_up' THEN n END), 0) AS f_gave_up,
        COALESCE(SUM(CASE WHEN kind = 'failed_pruned' THEN n END), 0) AS f_pruned,
        COALESCE(SUM(CASE WHEN kind LIKE 'failed%' THEN n END), 0) AS failed,
        COALESCE(SUM(CASE WHEN kind = 'done' THEN n END), 0) AS done,
        COALESCE(SUM(CASE WHEN kind = 'done_adopted' THEN n END), 0) AS adopted,
        COALESCE(SUM(CASE WHEN kind = 'done_pruned' THEN n END), 0) AS done_pruned,
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
        UNION ALL SELECT 'failed', 3, failed FROM k
        UNION ALL SELECT 'done', 4, done + adopted + done_pruned FROM k
    ) s
    LEFT JOIN oldest o ON o.status = s.status
),
-- The first failed job that needs a person: the smallest id among the
-- first of each class but cancelled (one probe each).
first_failed AS (
    SELECT MIN(id) AS id FROM (
        SELECT (SELECT MIN(id) FROM jobs WHERE status = 'failed' AND pruned_at IS NULL AND error_class = c.column1) AS id
        FROM (VALUES ('not_sent'), ('rate_limited'), ('provider_error'), ('rejected'), ('malformed'), ('unstorable'),
                     ('timeout'), ('shutdown'), ('worker_restarted'), ('legacy')) c
        UNION ALL
        SELECT MIN(id) FROM jobs WHERE status = 'failed' AND pruned_at IS NULL AND error_class IS NULL)
),
-- Possible poison jobs: failed worker_restarted (not pruned) whose last
-- two attempts both ended worker_restarted, found from the attempts after
-- a first that ended worker_restarted (job_attempts_restarted_again), read
-- once, and counted up to 101 ("more than 100": job_board lists them).
poison AS MATERIALIZED (
    SELECT COUNT(*) AS n FROM (
        SELECT 1 FROM (SELECT DISTINCT a.job_id FROM job_attempts a
                       WHERE a.error_class = 'worker_restarted' AND a.attempt_number >= 2) c
        JOIN jobs j ON j.id = c.job_id
        WHERE j.status = 'failed' AND j.pruned_at IS NULL AND j.error_class = 'worker_restarted' AND j.gave_up_after IS NULL
          AND (SELECT COUNT(*) FROM job_attempts a
               WHERE a.job_id = j.id AND a.error_class = 'worker_restarted'
                 AND a.attempt_number >= (SELECT MAX(m.attempt_number) FROM job_attempts m WHERE m.job_id = j.id) - 1) = 2
        LIMIT 101) x
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
           WHEN c.status = 'done' AND (k.done - k.results > 0 OR k.done + k.done_pruned - k.charges > 0) THEN (
               -- Every done job Inkwell ran has its result and charge (a
               -- pruned one its charge): both are unique per job and written
               -- only by Complete, with the job's done, which is final; so
               -- none lacks one exactly when there are as many results, and
               -- as many charges, as such jobs. The kept counts say so;
               -- finding the job that lacks one walks the history, only when
               -- they say there is one.
               SELECT 'inspect job ' || MIN(j.id) || ' (inkwell show ' || MIN(j.id) || '): done without its result or charge, '
                      || 'which breaks an invariant; nothing rewrites it'
               FROM jobs j
               WHERE j.status = 'done' AND NOT (j.request_hash = 'legacy' AND j.lane IS NULL)
                 AND ((j.pruned_at IS NULL AND NOT EXISTS (SELECT 1 FROM results r WHERE r.job_id = j.id))
                      OR NOT EXISTS (SELECT 1 FROM charges ch WHERE ch.job_id = j.id)))
           WHEN c.status = 'done' THEN
               CASE WHEN k.adopted > 0 AND k.adopted = c.jobs THEN
                        'nothing to do: adopted from a legacy database as they were (the old Inkwell kept no result or charge)'
                    WHEN k.adopted > 0 THEN
                        'nothing to do: each has its result and charge, but for ' || k.adopted
                        || ' adopted from a legacy database as they were (the old Inkwell kept no result or charge)'
                    ELSE 'nothing to do: each has its result and charge' END
               || CASE WHEN k.done_pruned > 0 THEN
                      '; ' || k.done_pruned || ' pruned by retention (their prompt and text removed; key, attempts and charge kept): nothing to do'
                  ELSE '' END
           -- The queue moves in claim order: its head's action is the
           -- queue's, and the jobs waiting out a back-off follow.
           WHEN c.status = 'queued' THEN (
               SELECT CASE WHEN qs.head_action IS NOT NULL THEN qs.head_action || COALESCE('; ' || qs.waiting_text, '')
                           WHEN qs.waiting_text IS NOT NULL THEN 'wait: ' || qs.waiting_text
                           ELSE 'wait: live lanes claim round robin across accounts' END
               FROM queue_state qs)
           WHEN c.status = 'running' THEN
               substr(COALESCE('; ' || r.silent, '')
                      || COALESCE('; restart that lane: its startup recovery closes these as failed (' || r.dead || ')', '')
                      || CASE WHEN r.silent IS NULL AND r.dead IS NULL THEN '; wait: running on live lane ' || r.live_lanes
                              WHEN r.live_n > 0 THEN '; ' || r.live_n || ' more on live lane ' || r.live_lanes || ': wait'
                              ELSE '' END, 3)
           ELSE
               COALESCE((SELECT fa.next_action FROM failed_job_action fa WHERE fa.id = f.id)
                        || CASE WHEN c.jobs > 1 THEN ' (and ' || (c.jobs - 1) || ' more: SELECT * FROM job_board)' ELSE '' END,
                        'nothing to retry')
               || CASE WHEN k.f_not_sent > 0 THEN '; ' || k.f_not_sent || ' not_sent: safe to retry, nothing reached the provider' ELSE '' END
               || CASE WHEN k.f_rate_limited > 0 THEN '; ' || k.f_rate_limited || ' rate_limited: safe to retry, the provider answered 429 and billed nothing' ELSE '' END
               || CASE WHEN k.f_provider_error > 0 THEN '; ' || k.f_provider_error || ' provider_error: safe to retry, the provider answered with a server error (5xx)' ELSE '' END
               || CASE WHEN k.f_rejected > 0 THEN '; ' || k.f_rejected || ' rejected by the provider: fix its cause first (the API key, the model or the request), a retry will fail the same way' ELSE '' END
               || CASE WHEN k.f_malformed > 0 THEN '; ' || k.f_malformed || ' malformed: inspect the provider''s answer first, Inkwell could not read it and a retry may get the same; the provider may have billed the call' ELSE '' END
               || CASE WHEN k.f_unstorable > 0 THEN '; ' || k.f_unstorable || ' unstorable: fix the database first (disk full? a constraint?), it refused the provider''s answer; the provider billed the call' ELSE '' END
               || CASE WHEN k.f_timeout > 0 THEN '; ' || k.f_timeout || ' timeout: no answer came in time, the provider may have billed the call; with a provider that ignores keys (openai) a retry may bill twice, so check its usage first' ELSE '' END
               || CASE WHEN k.f_shutdown > 0 THEN '; ' || k.f_shutdown || ' shutdown: a stop cut the call short, the provider may have billed it; with a provider that ignores keys (openai) a retry may bill twice, so check its usage first' ELSE '' END
               || CASE WHEN k.f_restarted > 0 THEN
                      '; ' || k.f_restarted || ' worker_restarted: the worker died during the attempt, so the provider may already have billed them; '
                      || 'a provider that honours keys answers a retry from its record, one that ignores them (openai) may bill twice: check its usage first'
                      || CASE WHEN (SELECT n FROM poison) > 0 THEN
                             '; ' || CASE WHEN (SELECT n FROM poison) > 100 THEN 'more than 100 possible poison jobs'
                                          WHEN (SELECT n FROM poison) > 1 THEN (SELECT n FROM poison) || ' possible poison jobs'
                                          ELSE '1 possible poison job' END
                             || ' (the last two attempts ended worker_restarted): it may be what kills the worker; inspect it before a retry'
                         ELSE '' END
                  ELSE '' END
               || CASE WHEN k.f_gave_up > 0 THEN '; ' || k.f_gave_up || ' gave up after automatic retries: the provider kept failing; check it (its status, limits and API key), then retry' ELSE '' END
               || CASE WHEN k.f_legacy > 0 THEN '; ' || k.f_legacy || ' legacy (failed before failures had classes, the words do not tell): inspect the error, then retry' ELSE '' END
               || CASE WHEN k.f_cancelled_running > 0 THEN '; ' || k.f_cancelled_running || ' cancelled while the provider call was in flight: the provider may have billed them; nothing to do' ELSE '' END
               || CASE WHEN k.f_cancelled > 0 THEN '; ' || k.f_cancelled || ' cancelled while queued: nothing to do (job_board says of each whether an earlier call may have billed it)' ELSE '' END
               || CASE WHEN k.f_pruned > 0 THEN '; ' || k.f_pruned || ' pruned by retention: their prompt is gone, nothing to retry' ELSE '' END
       END AS next_action
FROM counted c
CROSS JOIN k
CROSS JOIN running_summary r
LEFT JOIN first_failed f ON c.status = 'failed'
ORDER BY c.ord;
