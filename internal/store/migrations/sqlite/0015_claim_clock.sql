-- The turn the claims have reached, kept in one row (DESIGN.md §10;
-- store/claim_fair.go), SQLite dialect.
--
-- Until now "served" was read as the highest turn of a job not queued,
-- from jobs_served_turn: one more index entry for every job a claim
-- takes (on PostgreSQL about 1 kB more WAL per claim of 16), and a job
-- cancelled while queued counted as served, so cancelling a flood put
-- every newcomer behind the whole of it.
--
-- claim_clock.served is written by the claim, in the claim's own
-- transaction (GREATEST of what it held and the highest turn claimed),
-- and by nothing else, so it never goes back and a cancel does not move
-- it. A job cancelled while queued gives its turn back (claim_turn 0, in
-- the cancel's UPDATE), so it no longer counts as its account's last turn
-- either.
--
-- This migration: jobs cancelled while queued (no started_at) give back
-- their turns; the clock starts at the highest turn of a job that left
-- the queue, which is what served was read as until now.

UPDATE jobs SET claim_turn = 0
WHERE status = 'failed' AND error_class = 'cancelled' AND started_at IS NULL AND claim_turn <> 0;

CREATE TABLE claim_clock (
    id     INTEGER PRIMARY KEY CHECK (id = 1),
    served INTEGER NOT NULL
);
INSERT INTO claim_clock (id, served)
SELECT 1, COALESCE(MAX(claim_turn), 0) FROM jobs WHERE status <> 'queued';

DROP INDEX jobs_served_turn;
