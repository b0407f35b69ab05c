-- batches.reopened counts the times a line of the batch went from done or
-- failed back to queued or running (a retry by hand: the only way a batch
-- that has ended can end again later). Retention prunes a batch's lines
-- only once the whole batch ended before the cut-off, and asks again in
-- each transaction that prunes them, since a retry may have re-opened it;
-- with this count the question is one row read, and the batch's lines are
-- read again only when it changed. Reading all of a 50,000-line batch's
-- lines in every prune transaction held SQLite's one writer for tens of
-- milliseconds a time (docs/benchmarks.md, "Pruning a large batch"). A
-- trigger, so that no way of putting a line back can forget it; claims and
-- completions only test its WHEN.
ALTER TABLE batches ADD COLUMN reopened INTEGER NOT NULL DEFAULT 0;

CREATE TRIGGER batches_reopened
AFTER UPDATE OF status ON jobs
WHEN NEW.batch_id IS NOT NULL AND OLD.status IN ('done', 'failed') AND NEW.status IN ('queued', 'running')
BEGIN
    UPDATE batches SET reopened = reopened + 1 WHERE id = NEW.batch_id;
END;
