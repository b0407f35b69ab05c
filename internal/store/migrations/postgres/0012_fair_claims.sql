-- Fair claims across accounts (DESIGN.md §10; store/claim_fair.go),
-- PostgreSQL dialect: the same index as migrations/sqlite/0012_fair_claims.sql.
--
-- jobs_queued_account: queued jobs by the account that pays (jobs.account,
-- migration 0008: the one source of truth, set by accept and batches),
-- then id, then not_before, so that the claim finds "the next account with
-- a ready job" and "the oldest ready job of this account" by one probe
-- each. The expression is the store's (dialect.claimAccount): the planner
-- uses the index only for the same expression. COLLATE "C": accounts in
-- byte order whatever the database's collation, the order the store's
-- turn uses.

CREATE INDEX jobs_queued_account ON jobs ((account COLLATE "C"), id, not_before) WHERE status = 'queued';
