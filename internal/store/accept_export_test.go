package store

import (
	"context"

	"github.com/inkwell/inkwell"
)

// AcceptResult is one member's answer from AcceptBatch.
type AcceptResult struct {
	Job     inkwell.Job
	Created bool
	Err     error
}

// AcceptBatch commits ps as one group-commit batch, exactly as the batcher
// commits requests that arrived together while a commit was in flight, and
// returns each member's answer in order. ctxs[i] is member i's context.
// Concurrent Accepts leave a batch's members to the scheduler; this lets a
// test fix them.
func AcceptBatch(s *Store, ctxs []context.Context, ps []AcceptParams) []AcceptResult {
	batch := make([]*acceptReq, len(ps))
	for i, p := range ps {
		batch[i] = &acceptReq{ctx: ctxs[i], p: p, done: make(chan acceptRes, 1)}
	}
	s.accepts.commit(append([]*acceptReq(nil), batch...)) // commit reuses its slice
	out := make([]AcceptResult, len(batch))
	for i, r := range batch {
		res := <-r.done
		out[i] = AcceptResult{Job: res.job, Created: res.created, Err: res.err}
	}
	return out
}
