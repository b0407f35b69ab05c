//go:build !linux

package store

// SQLiteWriteLockHolder cannot tell off Linux (no /proc/locks).
func SQLiteWriteLockHolder(string) string { return "" }
