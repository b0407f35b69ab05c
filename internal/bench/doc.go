// Package bench holds Inkwell's end-to-end benchmarks: real SQLite files at
// synchronous=FULL, the real HTTP server on loopback, the real worker lane.
// It has no non-test code; `go test -bench . ./internal/bench` runs it and
// docs/benchmarks.md records the figures.
package bench
