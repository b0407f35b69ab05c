-- The OpenAI Files and Batches API (docs/design.md §12, docs/batches.md):
-- the same tables, columns and meanings as
-- migrations/sqlite/0017_files_openai_batches.sql.
--
--   * files: one row per upload (POST /v1/files, purpose batch), never
--     changed after its insert; id is "file-" and 24 random hex digits.
--   * file_parts: the content in parts of at most 1 MiB, numbered from 0,
--     so that nothing holds more than one part in memory.
--   * batches: input_file_id, endpoint, completion_window, metadata (JSON
--     text) of a batch created from a file; cancelling_at, cancelled_at.

CREATE TABLE files (
    id         text PRIMARY KEY,
    account    text NOT NULL,
    purpose    text NOT NULL CHECK (purpose = 'batch'),
    filename   text NOT NULL,
    bytes      bigint NOT NULL CHECK (bytes >= 0),
    lines      integer NOT NULL CHECK (lines >= 0),
    created_at timestamptz NOT NULL
);
CREATE INDEX files_account ON files (account, created_at);

CREATE TABLE file_parts (
    file_id text NOT NULL REFERENCES files (id),
    part    integer NOT NULL CHECK (part >= 0),
    data    bytea NOT NULL,
    PRIMARY KEY (file_id, part)
);

ALTER TABLE batches ADD COLUMN input_file_id text REFERENCES files (id);
ALTER TABLE batches ADD COLUMN endpoint text;
ALTER TABLE batches ADD COLUMN completion_window text;
ALTER TABLE batches ADD COLUMN metadata text;
ALTER TABLE batches ADD COLUMN cancelling_at timestamptz;
ALTER TABLE batches ADD COLUMN cancelled_at timestamptz;
