-- Accounts and API tokens (DESIGN.md §10).
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
    name            TEXT PRIMARY KEY,
    budget_micros   INTEGER CHECK (budget_micros >= 0),
    reserved_micros INTEGER NOT NULL DEFAULT 0 CHECK (reserved_micros >= 0),
    spent_micros    INTEGER NOT NULL DEFAULT 0 CHECK (spent_micros >= 0),
    rpm             INTEGER NOT NULL DEFAULT 0 CHECK (rpm >= 0),
    created_at      TEXT NOT NULL
);
INSERT INTO accounts (name, created_at)
VALUES ('default', strftime('%Y-%m-%dT%H:%M:%S', 'now') || '.000000Z');

CREATE TABLE api_tokens (
    id            TEXT PRIMARY KEY,
    account       TEXT NOT NULL REFERENCES accounts (name),
    role          TEXT NOT NULL CHECK (role IN ('client', 'operator')),
    secret_sha256 TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    last_used_at  TEXT,
    revoked_at    TEXT
);
CREATE INDEX api_tokens_account ON api_tokens (account);
