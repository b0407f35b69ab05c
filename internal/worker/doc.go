// Package worker owns one worker lane: take the lane lock, run startup
// recovery, register the lane, then loop claim -> call the provider outside
// any transaction -> complete or fail, with a heartbeat beside it and a
// graceful stop.
//
// It imports the root inkwell package, internal/store and
// internal/crashpoint; never internal/api.
package worker
