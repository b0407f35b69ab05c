-- Webhooks (DESIGN.md §11), SQLite dialect.
--
--   * accounts.webhook_url: where the account's job events go (NULL: none).
--     webhook_secret is the Standard Webhooks signing secret, 'whsec_' and
--     the base64 of 32 random bytes; the sender needs it to sign, so it is
--     stored as it is (shown once by the CLI). webhook_since: when the URL
--     was last set from none; jobs that ended before it have no delivery.
--   * webhook_deliveries: one row per job end (done, or failed for good)
--     of an account with a webhook_url, written by the trigger below in the
--     transaction that ends the job. Its event data (status, error, class,
--     when) is a snapshot of that end, so every attempt sends the same body.
--     attempts counts the sends begun; next_attempt_at is when the next
--     may begin (a claim pushes it out by a lease, so a sender that dies
--     mid-send leaves the row to be claimed again after it); delivered_at
--     is the commit after a 2xx; gave_up_at ends the retries. replay_of
--     names the delivery an operator replayed (its webhook-id is reused).
--
-- The trigger is the one place that writes a delivery for an ending job,
-- whatever transition ends it (complete, fail, cancel, recovery, rescue).
-- It fires on UPDATE OF status only: prune's delete and insert of a job row
-- (prune.go) is no status change and writes no delivery; a reschedule
-- (running -> queued) and a retry (failed -> queued) end nothing. The
-- foreign key to jobs has no ON DELETE action: prune's deferred foreign
-- keys see the job row back before the commit.

ALTER TABLE accounts ADD COLUMN webhook_url TEXT;
ALTER TABLE accounts ADD COLUMN webhook_secret TEXT;
ALTER TABLE accounts ADD COLUMN webhook_since TEXT;
CREATE INDEX accounts_webhook ON accounts (name) WHERE webhook_url IS NOT NULL;

CREATE TABLE webhook_deliveries (
    id              INTEGER PRIMARY KEY,
    job_id          INTEGER NOT NULL REFERENCES jobs (id),
    account         TEXT NOT NULL REFERENCES accounts (name),
    event           TEXT NOT NULL CHECK (event IN ('job.done', 'job.failed')),
    job_error       TEXT,
    job_error_class TEXT,
    occurred_at     TEXT NOT NULL,            -- the job's finished_at
    created_at      TEXT NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at TEXT NOT NULL,
    last_attempt_at TEXT,
    last_status     INTEGER,                  -- the receiver's HTTP status (NULL: no answer)
    last_error      TEXT,
    delivered_at    TEXT,
    gave_up_at      TEXT,
    replay_of       INTEGER REFERENCES webhook_deliveries (id)
);
-- The sender reads only pending rows, by when they are due.
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE delivered_at IS NULL AND gave_up_at IS NULL;
CREATE INDEX webhook_deliveries_job ON webhook_deliveries (job_id);
CREATE INDEX webhook_deliveries_account ON webhook_deliveries (account, id);

CREATE TRIGGER webhook_deliveries_on_job_end
AFTER UPDATE OF status ON jobs
FOR EACH ROW
WHEN NEW.status IN ('done', 'failed') AND OLD.status <> NEW.status
 AND EXISTS (SELECT 1 FROM accounts WHERE webhook_url IS NOT NULL)
BEGIN
    INSERT INTO webhook_deliveries (job_id, account, event, job_error, job_error_class, occurred_at, created_at, next_attempt_at)
    SELECT NEW.id, a.name, 'job.' || NEW.status, NEW.error, NEW.error_class,
           COALESCE(NEW.finished_at, strftime('%Y-%m-%dT%H:%M:%S', 'now') || '.000000Z'),
           COALESCE(NEW.finished_at, strftime('%Y-%m-%dT%H:%M:%S', 'now') || '.000000Z'),
           COALESCE(NEW.finished_at, strftime('%Y-%m-%dT%H:%M:%S', 'now') || '.000000Z')
    FROM accounts a
    WHERE a.webhook_url IS NOT NULL
      AND a.name = CASE WHEN json_valid(NEW.payload) AND json_type(NEW.payload, '$.account') = 'text'
                        THEN json_extract(NEW.payload, '$.account') ELSE 'default' END;
END;
