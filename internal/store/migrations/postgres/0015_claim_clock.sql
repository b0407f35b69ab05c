-- The turn the claims have reached, kept in one row (DESIGN.md §10;
-- store/claim_fair.go), PostgreSQL dialect: the same change as
-- migrations/sqlite/0015_claim_clock.sql, which says what it is for.

UPDATE jobs SET claim_turn = 0
WHERE status = 'failed' AND error_class = 'cancelled' AND started_at IS NULL AND claim_turn <> 0;

CREATE TABLE claim_clock (
    id     integer PRIMARY KEY CHECK (id = 1),
    served bigint NOT NULL
);
INSERT INTO claim_clock (id, served)
SELECT 1, COALESCE(MAX(claim_turn), 0) FROM jobs WHERE status <> 'queued';

DROP INDEX jobs_served_turn;
