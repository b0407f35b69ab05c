-- Fair claims by turn (DESIGN.md §10; store/claim_fair.go), PostgreSQL
-- dialect: the same column and indexes as
-- migrations/sqlite/0013_claim_turns.sql, which says what they are for.

ALTER TABLE jobs ADD COLUMN claim_turn bigint NOT NULL DEFAULT 0;

UPDATE jobs SET claim_turn = q.turn
FROM (SELECT id, row_number() OVER (PARTITION BY account ORDER BY id) - 1 AS turn FROM jobs WHERE status = 'queued') AS q
WHERE q.id = jobs.id;

DROP INDEX jobs_queued_account;
CREATE INDEX jobs_queued_turn ON jobs (claim_turn, id, not_before) WHERE status = 'queued';
CREATE INDEX jobs_account_turn ON jobs (account, claim_turn);
CREATE INDEX jobs_served_turn ON jobs (claim_turn) WHERE status <> 'queued';
