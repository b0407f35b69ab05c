-- Batches (docs/batches.md): POST /v1/batches takes many job requests at
-- once, in the OpenAI batch input form, and stores one job per line in one
-- transaction.
--
--   * batches: one row per accepted batch. (account, idempotency_key) is
--     unique: a re-sent batch finds its row and creates nothing new.
--     request_hash is the fingerprint of every normalized line in order
--     (a re-send with another body is refused); lines is how many jobs it
--     made.
--   * jobs.batch_id, jobs.batch_custom_id: the batch a job came from and
--     the line's custom_id (NULL for a job sent alone). A job's key is
--     derived from both (store.BatchJobKey) and holds a space, which no
--     Idempotency-Key header may: a job sent alone never takes a batch
--     line's key. Existing rows keep NULL: every job before this one was
--     sent alone.

CREATE TABLE batches (
    id              INTEGER PRIMARY KEY,
    account         TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    request_hash    TEXT NOT NULL,
    lines           INTEGER NOT NULL CHECK (lines >= 1),
    created_at      TEXT NOT NULL,
    UNIQUE (account, idempotency_key)
);

ALTER TABLE jobs ADD COLUMN batch_id INTEGER REFERENCES batches (id);
ALTER TABLE jobs ADD COLUMN batch_custom_id TEXT;
-- A batch's jobs, by line: the counts and the output read only these.
CREATE UNIQUE INDEX jobs_batch_line ON jobs (batch_id, batch_custom_id) WHERE batch_id IS NOT NULL;
