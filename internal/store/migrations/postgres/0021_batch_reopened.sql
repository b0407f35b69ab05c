-- batches.reopened counts the times a line of the batch went from done or
-- failed back to queued or running (a retry by hand: the only way a batch
-- that has ended can end again later). Retention prunes a batch's lines
-- only once the whole batch ended before the cut-off, and asks again in
-- each transaction that prunes them, since a retry may have re-opened it;
-- with this count the question is one row read (FOR SHARE: a retry's
-- trigger waits for the prune, or the prune for the retry), and the
-- batch's lines are read again only when it changed (docs/benchmarks.md,
-- "Pruning a large batch"). A trigger, so that no way of putting a line
-- back can forget it; claims and completions only test its WHEN.
ALTER TABLE batches ADD COLUMN reopened BIGINT NOT NULL DEFAULT 0;

CREATE FUNCTION batches_reopened() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE batches SET reopened = reopened + 1 WHERE id = NEW.batch_id;
    RETURN NULL;
END
$$;

CREATE TRIGGER batches_reopened
AFTER UPDATE OF status ON jobs
FOR EACH ROW
WHEN (NEW.batch_id IS NOT NULL AND OLD.status IN ('done', 'failed') AND NEW.status IN ('queued', 'running'))
EXECUTE FUNCTION batches_reopened();
