// Package api owns Inkwell's HTTP interface: routes, request validation,
// the JSON error form, and the mapping from error codes to HTTP statuses
// (writeError, the one place). It declares the small store interface it
// uses and imports the root inkwell package, internal/store's types and
// internal/jobwait (the hub long-polls wait on); never internal/worker.
package api
