-- The OpenAI Files and Batches API (docs/design.md §12, docs/batches.md):
--
--   * files: one row per upload (POST /v1/files, purpose batch). id is
--     "file-" and 24 random hex digits, as OpenAI's are strings; account
--     owns it (another account's is "not found"); bytes and lines (the
--     non-blank lines, each a request) are counted while it is received.
--     A file is never changed after its insert.
--   * file_parts: the content, in parts of at most store.FilePartBytes
--     (1 MiB) numbered from 0, so that no upload, read or download ever
--     holds more than one part in memory (a file may be 100 MB). The row
--     and its parts are written in one transaction.
--   * batches: input_file_id, endpoint, completion_window and metadata (JSON
--     text) of a batch created from a file (NULL for the JSONL form, but
--     endpoint: the url every line names); cancelling_at is when a cancel
--     was asked and cancelled_at when it had ended every job of the batch.

CREATE TABLE files (
    id         TEXT PRIMARY KEY,
    account    TEXT NOT NULL,
    purpose    TEXT NOT NULL CHECK (purpose = 'batch'),
    filename   TEXT NOT NULL,
    bytes      INTEGER NOT NULL CHECK (bytes >= 0),
    lines      INTEGER NOT NULL CHECK (lines >= 0),
    created_at TEXT NOT NULL
);
CREATE INDEX files_account ON files (account, created_at);

CREATE TABLE file_parts (
    file_id TEXT NOT NULL REFERENCES files (id),
    part    INTEGER NOT NULL CHECK (part >= 0),
    data    BLOB NOT NULL,
    PRIMARY KEY (file_id, part)
);

ALTER TABLE batches ADD COLUMN input_file_id TEXT REFERENCES files (id);
ALTER TABLE batches ADD COLUMN endpoint TEXT;
ALTER TABLE batches ADD COLUMN completion_window TEXT;
ALTER TABLE batches ADD COLUMN metadata TEXT;
ALTER TABLE batches ADD COLUMN cancelling_at TEXT;
ALTER TABLE batches ADD COLUMN cancelled_at TEXT;
