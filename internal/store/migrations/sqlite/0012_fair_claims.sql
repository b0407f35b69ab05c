-- Fair claims across accounts (DESIGN.md §10; store/claim_fair.go), SQLite
-- dialect.
--
-- jobs_queued_account: queued jobs by the account their payload names
-- (legacy payloads name none: 'default'), then id, then not_before, so
-- that the claim finds "the next account with a ready job" and "the
-- oldest ready job of this account" by one probe each, reading the index
-- alone. The expression is the store's (dialect.claimAccount), character
-- for character: the planner uses the index only for the same expression.
-- ->> 'account' is json_extract(payload, '$.account'). Payloads are JSON
-- (accept writes them normalized; legacy adoption writes json_object).

CREATE INDEX jobs_queued_account ON jobs (account, id, not_before) WHERE status = 'queued';
