-- Fair claims across accounts (DESIGN.md §10; store/claim_fair.go), SQLite
-- dialect.
--
-- jobs_queued_account: queued jobs by the account that pays (jobs.account,
-- migration 0008: the one source of truth, set by accept and batches;
-- legacy rows 'default'), then id, then not_before, so that the claim
-- finds "the next account with a ready job" and "the oldest ready job of
-- this account" by one probe each, reading the index alone.

CREATE INDEX jobs_queued_account ON jobs (account, id, not_before) WHERE status = 'queued';
