package store

// ClaimWebhooksSQL and ParkOrphanWebhooksSQL are ClaimWebhooks' two
// statements in s's dialect, for tests that run them in a transaction of
// their own (two senders at once).
func ClaimWebhooksSQL(s *Store) string      { return s.dialect.rebind(s.claimWebhooksSQL()) }
func ParkOrphanWebhooksSQL(s *Store) string { return s.dialect.rebind(s.parkOrphanWebhooksSQL()) }
