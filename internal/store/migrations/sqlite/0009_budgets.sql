-- Budgets (DESIGN.md §10, issue 12 item 5), SQLite dialect.
--
--   * jobs.reservation_micros: the job's worst-case cost, reserved against
--     its account's budget at accept (internal/store/budgets.go). 0 when
--     the job has no reservation (reservation_state NULL).
--   * jobs.reservation_account: the account the reservation is held on.
--   * jobs.reservation_state: NULL (no reservation: a job accepted before
--     this migration, or whose account has no accounts row), 'open'
--     (counted in accounts.reserved_micros), 'settled' (the completion
--     turned it into the charge) or 'released' (evidence said nothing was
--     billed, or an operator closed it). For every account,
--     reserved_micros = SUM(reservation_micros) of its 'open' jobs.
--   * accounts.spent_micros: from now on kept equal to the sum of the
--     account's charges; this migration counts the charges already stored.
--     Existing jobs keep no reservation: they are charged on completion.

ALTER TABLE jobs ADD COLUMN reservation_micros INTEGER NOT NULL DEFAULT 0 CHECK (reservation_micros >= 0);
ALTER TABLE jobs ADD COLUMN reservation_account TEXT;
ALTER TABLE jobs ADD COLUMN reservation_state TEXT CHECK (reservation_state IN ('open', 'settled', 'released'));

-- The open reservations, for the drill's and the tests' sums and for an
-- operator's "which jobs hold this account's money".
CREATE INDEX jobs_reservation_open ON jobs (reservation_account) WHERE reservation_state = 'open';

UPDATE accounts SET spent_micros = (SELECT COALESCE(SUM(c.amount_micros), 0) FROM charges c WHERE c.account = accounts.name);
