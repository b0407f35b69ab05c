-- Fair claims by turn (DESIGN.md §10; store/claim_fair.go), SQLite dialect.
--
-- claim_turn: a job's turn in the round robin across accounts. A job
-- entering the queue (accept, batch, retry, reschedule) gets the turn after
-- the last one its account was given, and never one before the turn the
-- claims have reached (the highest turn of a job that left the queue): an
-- account that arrives with one job is served in the current turn, beside
-- every other account's next job. A claim takes the lowest turns, oldest
-- id first within a turn: one ordered read of jobs_queued_turn, as the
-- oldest-first claim read jobs_queued, where the account walk of migration
-- 0012 made one index probe per account.
--
-- Jobs already queued get their place in their account's queue, by id:
-- each account's oldest in turn 0, its next in turn 1, and so on; every
-- other job keeps turn 0, so the claims start from turn 0.

ALTER TABLE jobs ADD COLUMN claim_turn INTEGER NOT NULL DEFAULT 0;

UPDATE jobs SET claim_turn = q.turn
FROM (SELECT id, ROW_NUMBER() OVER (PARTITION BY account ORDER BY id) - 1 AS turn FROM jobs WHERE status = 'queued') AS q
WHERE q.id = jobs.id;

-- jobs_queued_turn: the claim's order (turn, then id), with not_before so
-- that a job waiting out a back-off is passed over from the index alone.
-- jobs_account_turn: an account's last turn, one probe (every job, so that
-- the turn survives the claim; a claim changes neither column, so SQLite
-- leaves this index alone when it claims).
-- jobs_served_turn: the turn the claims have reached, one probe.
DROP INDEX jobs_queued_account;
CREATE INDEX jobs_queued_turn ON jobs (claim_turn, id, not_before) WHERE status = 'queued';
CREATE INDEX jobs_account_turn ON jobs (account, claim_turn);
CREATE INDEX jobs_served_turn ON jobs (claim_turn) WHERE status <> 'queued';
