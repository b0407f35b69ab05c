-- files.deleted_at is when an upload was deleted (DELETE /v1/files/{id}).
-- Its content (file_parts) goes in the same transaction; the row stays,
-- so that a batch made of the file still names where its lines came from
-- (batches.input_file_id), and when that file went. A deleted file is no
-- file to the API: 404, as an unknown one.
ALTER TABLE files ADD COLUMN deleted_at TEXT;
