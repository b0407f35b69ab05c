// Package drill owns the crash-timeline drill behind `inkwell drill`
// (docs/design.md §6): it runs real `inkwell provider-sim` and `inkwell
// serve` children, kills serve at each crash point (or at random), restarts
// it, re-sends as a real client would, reads the database through SQL after
// the crash, after recovery and at the end, and checks the invariants of
// docs/design.md §7. Its report, scenario by scenario, is
// docs/crash-timeline.md; its files are mapped in docs/development.md.
//
// It only reads SQL (plus CREATE and DROP DATABASE for a PostgreSQL --db)
// and never imports worker or api: it speaks to serve over HTTP.
package drill
