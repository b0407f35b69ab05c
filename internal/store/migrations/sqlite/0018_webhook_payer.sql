-- The webhook delivery row of a job that ends is written for the account
-- that pays for it, read from jobs.account (where accept stored who pays,
-- inkwell.Payer), no longer from the payload's JSON: one place says who
-- pays. Rows are unchanged; only the trigger's body is replaced.

DROP TRIGGER webhook_deliveries_on_job_end;
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
    WHERE a.webhook_url IS NOT NULL AND a.name = NEW.account;
END;
