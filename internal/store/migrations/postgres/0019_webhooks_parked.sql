-- A pending delivery of an account whose webhook URL was removed waits,
-- parked: its next_attempt_at is 9999-12-31 (store.WebhookParked), past
-- any time the sender looks for, so the due index's scan
-- (next_attempt_at <= now) never reaches it. Before, such deliveries
-- stayed due, and every poll of the sender read all of them (200,000 of
-- them: 63 ms a poll, under SQLite's write lock) to find none it could
-- send. Setting a URL again makes them due at once (store.setWebhookTx).
-- Here: the ones already waiting.

UPDATE webhook_deliveries SET next_attempt_at = '9999-12-31T00:00:00Z'
WHERE delivered_at IS NULL AND gave_up_at IS NULL
  AND account IN (SELECT name FROM accounts WHERE webhook_url IS NULL);
