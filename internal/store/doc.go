// Package store owns Inkwell's durable state: the schema and its migrations,
// every SQL statement, every state transition of docs/design.md §2 (one method
// each, all in transitions.go and recover.go), the lane lock that is the
// evidence of a dead worker, and the dialect differences between SQLite
// and PostgreSQL. Accounts and tokens are in accounts.go and tokens.go;
// budget reservations (reserve at accept, settle, release, docs/design.md §10)
// in budgets.go, called inside the transitions' own transactions.
//
// It is the only package that writes SQL or imports a database driver. It
// imports the root inkwell package and internal/crashpoint, and never
// internal/api or internal/worker.
package store
