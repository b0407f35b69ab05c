// Package store owns Inkwell's durable state: the schema and its migrations,
// every SQL statement, every state transition of docs/design.md §2 (one method
// each, all in transitions.go and recover.go), the lane lock that is the
// evidence of a dead worker, and the dialect differences between SQLite
// and PostgreSQL.
//
// It is the only package that writes SQL or imports a database driver. It
// imports the root inkwell package and internal/crashpoint, and never
// internal/api or internal/worker.
package store
