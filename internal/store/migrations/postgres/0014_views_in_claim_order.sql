-- Operator views in claim order, PostgreSQL dialect: the same views,
-- columns and words as migrations/sqlite/0014_views_in_claim_order.sql,
-- which says why 0014 exists (since 0013 lanes claim in (claim_turn, id)
-- order, round robin across accounts, not in id order). queue_state,
-- job_board and job_overview are recreated (dependents first) with their
-- bodies as in 0006 but for the claim order: the queue's head, counted_to
-- (with counted_to_turn), "N queued ahead" near the head and beyond it,
-- job_board's order and its new last column claim_turn, and the words.
-- failed_job_action is unchanged. jobs_queued (0001) is read by nothing
-- any more, and every claim paid for its upkeep: it goes.

DROP VIEW job_overview;
DROP VIEW job_board;
DROP VIEW queue_state;
DROP INDEX jobs_queued;

-- queue_state: see the SQLite file. The head is the first job a claim
-- would take: in claim order, (claim_turn, id), not one waiting out its
-- back-off.
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
               || ', queued ' || overview_age_text(q.head_age_s) || ': read that lane''s log (database errors?) and restart it'
           ELSE
               'wait: lane ' || COALESCE(q.idle_lane, q.live_lane) || ' claims next'
               || CASE WHEN q.idle_lane IS NULL THEN ', when its running job ends' ELSE '' END
       END AS head_action,
       q.live_lane IS NULL OR (q.idle_lane IS NOT NULL AND COALESCE(q.head_age_s > q.stall_s, false)) AS stuck,
       CASE WHEN q.waiting > 0 THEN
           q.waiting || ' waiting for back-off, next at ' || overview_time_text(q.next_at)
       END AS waiting_text
FROM (
    SELECT
        (SELECT MIN(lane) FROM lane_liveness WHERE alive AND running_jobs = 0) AS idle_lane,
        (SELECT MIN(lane) FROM lane_liveness WHERE alive) AS live_lane,
        (SELECT string_agg(lane || ' ' || state || ' ' || heartbeat_age, ', ' ORDER BY lane) FROM lane_liveness) AS lanes_seen,
        (SELECT value FROM overview_settings WHERE name = 'claim_stall_seconds') AS stall_s,
        h.id AS head_id,
        CASE WHEN h.since IS NOT NULL THEN GREATEST(0, ROUND(EXTRACT(EPOCH FROM statement_timestamp() - h.since)))::bigint END AS head_age_s,
        -- The 1000th queued job in claim order, (claim_turn, id): job_board
        -- counts the place of a job up to it on the index (cheap near the
        -- head) and ranks the rest once per statement (see job_board).
        c.id AS counted_to,
        c.claim_turn AS counted_to_turn,
        (SELECT COUNT(*) FROM jobs WHERE status = 'queued' AND not_before > statement_timestamp()) AS waiting,
        (SELECT not_before FROM jobs WHERE status = 'queued' AND not_before > statement_timestamp()
         ORDER BY not_before LIMIT 1) AS next_at
    FROM (SELECT 1) one
    -- A job that waited out a back-off has been claimable since its
    -- not_before, not since it went back to queued (GREATEST skips NULL).
    LEFT JOIN (SELECT id, GREATEST(COALESCE(queued_at, created_at), not_before) AS since FROM jobs
               WHERE status = 'queued' AND (not_before IS NULL OR not_before <= statement_timestamp())
               ORDER BY claim_turn, id LIMIT 1) h ON true
    LEFT JOIN (SELECT claim_turn, id FROM jobs WHERE status = 'queued' ORDER BY claim_turn, id LIMIT 1 OFFSET 999) c ON true
    -- A fence: each of these is read once, however many times the CASE
    -- above names it (inlined, every mention would run its subquery again
    -- and count again in the plan's cost, which put job_overview's
    -- estimate past jit_above_cost and cost it seconds of JIT compiling).
    OFFSET 0
) q;

-- job_board: see the SQLite file. A queued job's place beyond the first
-- 1000 is found by binary search (width_bucket) in the queue's
-- (claim_turn, id) pairs in claim order, read once per statement and only
-- if needed.
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
                   CASE WHEN ll.answers_waiting > 0 AND ll.state <> 'stopped' THEN
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

-- job_overview: see the SQLite file.
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
          AND (SELECT COUNT(*) FROM job_attempts a
               WHERE a.job_id = j.id AND a.error_class = 'worker_restarted'
                 AND a.attempt_number >= (SELECT MAX(m.attempt_number) FROM job_attempts m WHERE m.job_id = j.id) - 1) = 2
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
CROSS JOIN running_action ra
LEFT JOIN first_failed f ON c.status = 'failed'
ORDER BY c.ord;
