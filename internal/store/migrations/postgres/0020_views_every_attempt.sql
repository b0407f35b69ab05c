-- Operator views, read by every attempt (PostgreSQL dialect): see the
-- SQLite file for what changed and why. Here also: a lane's answers
-- waiting are told only while its lock is held (lane_lock_held): a dead
-- lane's row keeps its last count, and "do not restart lane X, a restart
-- loses those answers" was told of a lane whose answers died with it.

DROP VIEW job_overview;
DROP VIEW job_board;
DROP VIEW failed_job_action;

CREATE VIEW failed_job_action AS
SELECT j.id,
           CASE
           WHEN j.pruned_at IS NOT NULL THEN
               'nothing to do: pruned by retention at ' || overview_time_text(j.pruned_at)
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
SELECT b.id, b.status, b.lane,
       COALESCE(b.last_attempt, 0) AS attempt,
       b.since,
       b.age_s AS age_seconds,
       overview_age_text(b.age_s) AS age,
       b.error,
       CASE
           WHEN b.status = 'queued' AND (q.stuck OR b.id = q.head_id) THEN q.head_action
           WHEN b.status = 'queued' AND b.not_before > statement_timestamp() THEN
               'wait: back-off after attempt ' || COALESCE(b.last_attempt, 0) || ' failed (' || COALESCE(b.error_class, 'legacy')
               || '): automatic retry, claimed from ' || overview_time_text(b.not_before)
           WHEN b.status = 'queued' THEN
               'wait: '
               || CASE WHEN q.counted_to IS NULL OR (b.claim_turn, b.id) <= (q.counted_to_turn, q.counted_to)
                       -- Two ranges of jobs_queued_turn, as on SQLite: the earlier
                       -- turns, then the smaller ids of its own turn.
                       THEN (SELECT COUNT(*) FROM jobs a WHERE a.status = 'queued' AND a.claim_turn < b.claim_turn)
                            + (SELECT COUNT(*) FROM jobs a WHERE a.status = 'queued' AND a.claim_turn = b.claim_turn AND a.id < b.id)
                       ELSE width_bucket(ROW(b.claim_turn, b.id),
                                         (SELECT array_agg(ROW(claim_turn, id) ORDER BY claim_turn, id) FROM jobs WHERE status = 'queued')) - 1 END
               || ' queued ahead; live lanes claim round robin across accounts'
           WHEN b.status = 'running' THEN (
               SELECT
                   CASE WHEN ll.answers_waiting > 0 AND ll.state <> 'stopped' AND lane_lock_held(ll.lane) THEN
                       'answer waiting to be stored: lane ' || ll.lane || ' holds ' || ll.answers_waiting || ' provider answer'
                       || CASE WHEN ll.answers_waiting > 1 THEN 's' ELSE '' END
                       || ' the database has not taken yet (busy, locked or full?): free the database (a long transaction in another process? disk full?); '
                       || 'do not restart lane ' || ll.lane || ', a restart loses those answers; '
                   ELSE '' END
                   || CASE
                       WHEN ll.alive THEN
                           'wait: running on live lane ' || b.lane || ' (attempt '
                           || b.last_attempt
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
           ELSE (SELECT fa.next_action FROM failed_job_action fa WHERE fa.id = b.id)
       END AS next_action,
       b.error_class,
       b.pruned_at,
       b.claim_turn
FROM (
    SELECT o.*, CASE WHEN o.since IS NOT NULL THEN GREATEST(0, ROUND(EXTRACT(EPOCH FROM statement_timestamp() - o.since)))::bigint END AS age_s,
           (SELECT MAX(a.attempt_number) FROM job_attempts a WHERE a.job_id = o.id) AS last_attempt
    FROM (
        -- One branch per status, so each reads its partial index and none
        -- scans the done history.
        SELECT id, 'running'::text AS status, lane, error, error_class, not_before, gave_up_after, pruned_at, started_at AS since,
               NULL::bigint AS claim_turn
        FROM jobs WHERE status = 'running'
        UNION ALL
        SELECT id, 'queued'::text, lane, error, error_class, not_before, gave_up_after, pruned_at, COALESCE(queued_at, created_at),
               claim_turn
        FROM jobs WHERE status = 'queued'
        UNION ALL
        SELECT id, 'failed'::text, lane, error, error_class, not_before, gave_up_after, pruned_at, finished_at,
               NULL
        FROM jobs WHERE status = 'failed'
    ) o
) b
CROSS JOIN queue_state q
ORDER BY CASE b.status WHEN 'running' THEN 1 WHEN 'queued' THEN 2 ELSE CASE WHEN b.pruned_at IS NULL THEN 3 ELSE 4 END END, b.claim_turn, b.id;

CREATE VIEW job_overview AS
WITH
k AS (
    SELECT
        COALESCE(SUM(n) FILTER (WHERE kind = 'queued'), 0) AS queued,
        COALESCE(SUM(n) FILTER (WHERE kind = 'running'), 0) AS running,
        COALESCE(SUM(n) FILTER (WHERE kind = 'failed_not_sent'), 0) AS f_not_sent,
        COALESCE(SUM(n) FILTER (WHERE kind = 'failed_rate_limited'), 0) AS f_rate_limited,
        COALESCE(SUM(n) FILTER (WHERE kind = 'failed_provider_error'), 0) AS f_provider_error,
        COALESCE(SUM(n) FILTER (WHERE kind = 'failed_rejected'), 0) AS f_rejected,
        COALESCE(SUM(n) FILTER (WHERE kind = 'failed_malformed'), 0) AS f_malformed,
        COALESCE(SUM(n) FILTER (WHERE kind = 'failed_unstorable'), 0) AS f_unstorable,
        COALESCE(SUM(n) FILTER (WHERE kind = 'failed_timeout'), 0) AS f_timeout,
        COALESCE(SUM(n) FILTER (WHERE kind = 'failed_shutdown'), 0) AS f_shutdown,
        COALESCE(SUM(n) FILTER (WHERE kind = 'failed_worker_restarted'), 0) AS f_restarted,
        COALESCE(SUM(n) FILTER (WHERE kind = 'failed_cancelled'), 0) AS f_cancelled,
        COALESCE(SUM(n) FILTER (WHERE kind = 'failed_cancelled_running'), 0) AS f_cancelled_running,
        COALESCE(SUM(n) FILTER (WHERE kind = 'failed_legacy'), 0) AS f_legacy,
        COALESCE(SUM(n) FILTER (WHERE kind = 'failed_gave_up'), 0) AS f_gave_up,
        COALESCE(SUM(n) FILTER (WHERE kind = 'failed_pruned'), 0) AS f_pruned,
        COALESCE(SUM(n) FILTER (WHERE kind LIKE 'failed%'), 0) AS failed,
        COALESCE(SUM(n) FILTER (WHERE kind = 'done'), 0) AS done,
        COALESCE(SUM(n) FILTER (WHERE kind = 'done_adopted'), 0) AS adopted,
        COALESCE(SUM(n) FILTER (WHERE kind = 'done_pruned'), 0) AS done_pruned,
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
        UNION ALL SELECT 'failed', 3, failed FROM k
        UNION ALL SELECT 'done', 4, done + adopted + done_pruned FROM k
    ) s
    LEFT JOIN oldest o ON o.status = s.status
),
first_failed AS (
    SELECT MIN(id) AS id FROM (
        -- ORDER BY error_class, id: jobs_failed_open's own order, so that a
        -- planner never walks jobs_failed_unpruned by id filtering on the
        -- class instead (it did, for IS NULL: every failed job read).
        SELECT (SELECT j.id FROM jobs j WHERE j.status = 'failed' AND j.pruned_at IS NULL AND j.error_class = c.cls
                ORDER BY j.error_class, j.id LIMIT 1) AS id
        FROM unnest(ARRAY['not_sent', 'rate_limited', 'provider_error', 'rejected', 'malformed', 'unstorable',
                          'timeout', 'shutdown', 'worker_restarted', 'legacy']) AS c(cls)
        UNION ALL
        SELECT * FROM (SELECT id FROM jobs WHERE status = 'failed' AND pruned_at IS NULL AND error_class IS NULL
                       ORDER BY error_class, id LIMIT 1) n) x
),
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
    SELECT j.lane, COUNT(*) AS n, COALESCE(ll.alive, false) AS alive, ll.state, ll.heartbeat_age, ll.pid, ll.host,
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
         FROM lane_liveness WHERE answers_waiting > 0 AND state <> 'stopped' AND lane_lock_held(lane)) AS answers,
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
           WHEN c.status = 'running' AND ra.answers IS NOT NULL THEN
               ra.answers || '; ' || CASE WHEN c.jobs = 0 THEN 'nothing running' ELSE ra.action END
           WHEN c.jobs = 0 AND c.status = 'queued' THEN 'nothing queued'
           WHEN c.jobs = 0 AND c.status = 'running' THEN 'nothing running'
           WHEN c.jobs = 0 AND c.status = 'failed' THEN 'nothing to retry'
           WHEN c.status = 'done' AND (k.done - k.results > 0 OR k.done + k.done_pruned - k.charges > 0) THEN (
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
           WHEN c.status = 'queued' THEN (
               SELECT CASE WHEN qs.head_action IS NOT NULL THEN qs.head_action || COALESCE('; ' || qs.waiting_text, '')
                           WHEN qs.waiting_text IS NOT NULL THEN 'wait: ' || qs.waiting_text
                           ELSE 'wait: live lanes claim round robin across accounts' END
               FROM queue_state qs)
           WHEN c.status = 'running' THEN ra.action
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
CROSS JOIN running_action ra
LEFT JOIN first_failed f ON c.status = 'failed'
ORDER BY c.ord;
