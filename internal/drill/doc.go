// Package drill owns the crash-timeline drill behind `inkwell drill`
// (docs/design.md §6): it starts real `inkwell provider-sim` and `inkwell serve`
// child processes, lets serve kill itself at each named crash point (and,
// in random mode, kills it at random instants), restarts it, re-sends
// requests as a real client would, reads the database through SQL after
// the crash, after recovery and at the end, and checks the invariants of
// docs/design.md §7 on what it read. It does so with one job at each point,
// and again with a lane's slots full of provider calls (the in-flight
// family, inflight.go: serve --concurrency 8, and the restart's one
// recovery run must close every attempt the crash left running); random
// mode kills a serve running several calls at once, with automatic retry
// on in most runs and some requests cancelled. The job-life families
// (joblife.go, docs/design.md §9) crash the points where automatic retry and
// cancel matter: reschedule runs serve with --max-attempts 3 behind the
// front (front.go), an HTTP front in the drill's own process that fails a
// job's first call(s) before the simulator sees them; cancel has the
// client cancel a job in flight, one waiting out a 429 and one already
// done; each ends with `inkwell prune --older-than 0s` and a re-send of
// every key (prune.go). Their invariants are check_joblife.go's. Every
// account has a budget, and the books of docs/design.md §10 are checked at
// every snapshot (check_budget.go); the budget-full scenario
// (inflight_budget.go) plays the in-flight one at provider.after-call with
// a budget its calls fill, so that a request after them is refused 402.
// Every serve runs with --config, a file the drill writes (models.go): the
// simulator as an openai provider that honours keys (model drill, the
// short form) and as an anthropic one that honours none (model
// drill-claude, priced, the chat form); invariant 6 and the money are
// judged per model (check_models.go), and the second bills the anthropic
// provider draws for answers lost are counted in the report.
// Its report is docs/crash-timeline.md.
//
// Besides internal/store it is the one package that runs SQL, and only to
// read (plus CREATE and DROP DATABASE for a PostgreSQL --db); the prune
// is the real `inkwell prune`, a child like serve. It imports
// the root package, internal/store (to open a database for inspection),
// internal/crashpoint (the names), providersim (to read the ledger),
// provider (to price a budget as serve reserves it, and count tokens as
// the simulator does) and catalog (to read its config as serve does). It
// never imports worker or api: it speaks to serve over HTTP, as a client.
package drill
