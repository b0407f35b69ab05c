-- Accounts and API tokens (DESIGN.md §10): the same tables, columns and
-- meanings as migrations/sqlite/0007_accounts_tokens.sql.
--
--   * accounts: who pays. budget_micros (NULL: no budget), reserved_micros,
--     spent_micros and rpm (0: no limit) are stored, NOT enforced yet:
--     budgets and per-account rpm come with a later change (issue 12,
--     items 5 and 6). The default account exists from this migration on.
--   * api_tokens: a token is shown once, as ink_<id>_<secret>; only the
--     SHA-256 of its secret is stored (hex). A revoked token keeps its row
--     (revoked_at set) so that its id is never reused and serve --auth auto
--     stays on once any token has existed. last_used_at is written in
--     batches, not per request.

CREATE TABLE accounts (
    name            text PRIMARY KEY,
    budget_micros   bigint CHECK (budget_micros >= 0),
    reserved_micros bigint NOT NULL DEFAULT 0 CHECK (reserved_micros >= 0),
    spent_micros    bigint NOT NULL DEFAULT 0 CHECK (spent_micros >= 0),
    rpm             integer NOT NULL DEFAULT 0 CHECK (rpm >= 0),
    created_at      timestamptz NOT NULL
);
INSERT INTO accounts (name, created_at) VALUES ('default', clock_timestamp());

CREATE TABLE api_tokens (
    id            text PRIMARY KEY,
    account       text NOT NULL REFERENCES accounts (name),
    role          text NOT NULL CHECK (role IN ('client', 'operator')),
    secret_sha256 text NOT NULL,
    created_at    timestamptz NOT NULL,
    last_used_at  timestamptz,
    revoked_at    timestamptz
);
CREATE INDEX api_tokens_account ON api_tokens (account);
