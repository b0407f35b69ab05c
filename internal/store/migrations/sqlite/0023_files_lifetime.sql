-- files.deleted_by is who deleted an upload (the actor, as audit_log
-- names one: 'token <id>', 'api', 'retention', 'cli'); NULL while it is
-- not deleted, and for a file deleted before this column.
--
-- files.expires_at is when the client asked an upload to go (its
-- expires_after, OpenAI's: docs/batches.md, "Deleting an upload"). From
-- then on it is 404, as a deleted file, and retention deletes it as
-- DELETE /v1/files/{id} does (content gone, deleted_at set, row kept).
-- NULL: kept until deleted. files_expiring finds the expired ones that
-- are not deleted yet.
--
-- files_created pages an operator's GET /v1/files (every account's, in
-- created_at and id order) without sorting the table; one account's
-- pages use files_account (0017).
ALTER TABLE files ADD COLUMN deleted_by TEXT;
ALTER TABLE files ADD COLUMN expires_at TEXT;
CREATE INDEX files_expiring ON files (expires_at) WHERE expires_at IS NOT NULL AND deleted_at IS NULL;
CREATE INDEX files_created ON files (created_at, id);
