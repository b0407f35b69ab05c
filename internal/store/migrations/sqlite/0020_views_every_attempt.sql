-- Operator views, read by every attempt (SQLite dialect; the PostgreSQL
-- file is the same in its own words). Three things the next safe action
-- got wrong, found in review:
--
-- - "safe to retry … a retry cannot bill twice" was decided on the job's
--   class, its last attempt's: a job whose first call timed out (it may
--   have billed) and whose retry then met a 5xx was called safe, where a
--   provider that ignores keys bills the next call again. failed_job_action
--   now says so unless every failed attempt of the job billed nothing
--   (not_sent, rate_limited, provider_error, rejected), as the budget's
--   release already decides.
-- - A possible poison job (its last two attempts both ended
--   worker_restarted) counts only the attempts that were run: an attempt
--   given back unsent (held_back, 0019) between two worker restarts hid it.
--   In failed_job_action and in job_overview's count alike.
-- - (PostgreSQL only: a lane's answers waiting are its process's, and a
--   lane whose lock is free is dead: its row's last count is not told as
--   answers a restart would lose. SQLite cannot see a lane's flock from SQL.)
--
-- - job_overview's count of the failed by class no longer calls them
--   "safe to retry": a count by the last class cannot tell which had an
--   earlier attempt that may have billed; job_board names those.
--
-- job_board reads failed_job_action and job_overview reads both: they
-- are dropped first and made again as 0014 made them, but for these words.

DROP VIEW job_overview;
DROP VIEW job_board;
DROP VIEW failed_job_action;

CREATE VIEW failed_job_action AS
SELECT j.id,
           CASE
           WHEN j.pruned_at IS NOT NULL THEN
               'nothing to do: pruned by retention at ' || strftime('%Y-%m-%dT%H:%M:%SZ', j.pruned_at)
               || ' (its prompt is gone, so it cannot run again; if it is still wanted, submit it anew under a new key)'
           WHEN j.gave_up_after IS NOT NULL THEN
               'gave up after ' || j.gave_up_after || ' attempts (the last ' || COALESCE(j.error_class, 'legacy')
               || '): automatic retry stopped; check the provider (its status, limits and API key), then inkwell retry ' || j.id
           WHEN j.error_class = 'cancelled' THEN
               -- May a call of this job have billed? Any attempt whose class is not
               -- one that bills nothing (not_sent, rate_limited, provider_error): the
               -- cancelled call in flight, an earlier timeout put back by automatic
               -- retry, a worker restart before a manual retry.
               CASE WHEN EXISTS (SELECT 1 FROM job_attempts a WHERE a.job_id = j.id
                                 AND a.error_class NOT IN ('not_sent', 'rate_limited', 'provider_error')) THEN
                   'nothing to do: cancelled after a call that may have billed it'
                   || ' (inkwell retry ' || j.id || ' runs it again under the job''s provider key: a provider that ignores keys (openai) may bill twice)'
               ELSE
                   'nothing to do: cancelled before any call that could bill it (inkwell retry ' || j.id || ' runs it after all)'
               END
           WHEN j.error_class = 'worker_restarted'
                AND (SELECT COUNT(*) FROM (SELECT a.error_class FROM job_attempts a
                           WHERE a.job_id = j.id AND a.held_back IS NOT TRUE
                           ORDER BY a.attempt_number DESC LIMIT 2) l
                     WHERE l.error_class = 'worker_restarted') = 2 THEN
               'possible poison job: it may be what kills the worker; inspect it before a retry'
               || ' (its last two attempts both ended worker_restarted: inkwell show ' || j.id || ')'
           WHEN j.error_class = 'worker_restarted' THEN
               'inspect the error, then inkwell retry ' || j.id
               || ' (the worker died during the attempt, so the provider may already have billed it; a provider that honours keys answers the retry from its record, one that ignores them (openai) may bill twice: check its usage first)'
           WHEN j.error_class IN ('not_sent', 'rate_limited', 'provider_error')
                AND EXISTS (SELECT 1 FROM job_attempts a WHERE a.job_id = j.id AND a.status = 'failed'
                            AND COALESCE(a.error_class, 'legacy') NOT IN ('not_sent', 'rate_limited', 'provider_error', 'rejected')) THEN
               -- Its last call billed nothing, but an earlier one may have:
               -- a provider that ignores keys bills a retry that succeeds.
               'check the provider''s usage first: an earlier attempt (' ||
               (SELECT 'attempt ' || a.attempt_number || ', ' || COALESCE(a.error_class, 'legacy') FROM job_attempts a
                WHERE a.job_id = j.id AND a.status = 'failed'
                  AND COALESCE(a.error_class, 'legacy') NOT IN ('not_sent', 'rate_limited', 'provider_error', 'rejected')
                ORDER BY a.attempt_number DESC LIMIT 1)
               || ') may have billed it; with a provider that ignores keys (openai) a retry may bill twice,'
               || ' with one that honours them (sim, provider-sim) the retry is answered from its record; then inkwell retry ' || j.id
           WHEN j.error_class IN ('not_sent', 'rate_limited', 'provider_error') THEN
               'safe to retry: inkwell retry ' || j.id || ' ('
               || CASE j.error_class WHEN 'not_sent' THEN 'nothing reached the provider'
                                     WHEN 'rate_limited' THEN 'the provider answered 429 and billed nothing'
                                     ELSE 'the provider answered with a server error (5xx)' END
               || ': a retry cannot bill twice)'
           WHEN j.error_class = 'rejected' THEN
               'fix its cause first (the API key, the model or the request; inspect the error), then inkwell retry ' || j.id
               || ': the provider refused the request, so a retry as it is will fail the same way'
           WHEN j.error_class = 'malformed' THEN
               'inspect the provider''s answer first: Inkwell could not read it, and a retry may get the same answer'
               || ' (the provider may have billed the call); then inkwell retry ' || j.id
           WHEN j.error_class = 'unstorable' THEN
               'fix the database first (disk full? a constraint?): it refused the provider''s answer; then inkwell retry ' || j.id
               || ' (the provider billed the call; the retry reuses the job''s provider key, and a provider that ignores keys bills it again)'
           WHEN j.error_class IN ('timeout', 'shutdown') THEN
               'check the provider''s usage first: '
               || CASE j.error_class WHEN 'timeout' THEN 'no answer came in time' ELSE 'a stop cut the call short' END
               || ', so the provider may have billed it; with a provider that ignores keys (openai) a retry may bill twice,'
               || ' with one that honours them (sim, provider-sim) the retry is answered from its record; then inkwell retry ' || j.id
           ELSE 'inspect the error, then inkwell retry ' || j.id
           END AS next_action
FROM jobs j
WHERE j.status = 'failed';

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
          AND (SELECT COUNT(*) FROM (SELECT a.error_class FROM job_attempts a
                     WHERE a.job_id = j.id AND a.held_back IS NOT TRUE
                     ORDER BY a.attempt_number DESC LIMIT 2) l
               WHERE l.error_class = 'worker_restarted') = 2
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
               || CASE WHEN k.f_not_sent > 0 THEN '; ' || k.f_not_sent || ' not_sent: nothing reached the provider on the last call: a retry cannot bill twice unless an earlier attempt may have billed (job_board names those)' ELSE '' END
               || CASE WHEN k.f_rate_limited > 0 THEN '; ' || k.f_rate_limited || ' rate_limited: the provider answered 429 and billed nothing on the last call: a retry cannot bill twice unless an earlier attempt may have billed (job_board names those)' ELSE '' END
               || CASE WHEN k.f_provider_error > 0 THEN '; ' || k.f_provider_error || ' provider_error: the provider answered the last call with a server error (5xx): a retry cannot bill twice unless an earlier attempt may have billed (job_board names those)' ELSE '' END
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
