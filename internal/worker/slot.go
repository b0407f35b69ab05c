package worker

// slot is one of a lane's Concurrency slots, taken by a claimed job until
// its provider call ends. What happens then depends on the store:
//
//   - Where an outcome's transaction also claims the slot's next job
//     (Store.OutcomesClaim: SQLite), the slot stays taken until the answer
//     is written, and runs the job claimed with it: one commit per job for
//     its outcome and its successor's claim.
//   - Where claims are statements of their own (PostgreSQL), the slot frees
//     as soon as the call ends, while the answer is being written: the lane
//     claims the next job during that write instead of after it, and a
//     call never waits for another job's commit. The answer is written all
//     the same, by the same goroutine, before the lane may stop. At most
//     answersPerSlot × Concurrency answers are written this way at once
//     (Lane.writing); beyond that a slot stays taken until its answer is
//     written, so a database slower than the provider holds the lane back
//     instead of letting answers pile up.
//
// Either way a lane has at most Concurrency provider calls in flight
// (design §8); what the overview calls running may include, on
// PostgreSQL, up to answersPerSlot times as many again whose answers are
// being written.
type slot struct {
	l       *Lane
	freed   bool // freed when its call ended
	writing bool // holds one of Lane.writing
}

// answersPerSlot bounds the answers a lane writes after their slots were
// freed: answersPerSlot × Concurrency. It only binds when the database
// writes answers more slowly than the provider gives them (with a real
// provider an answer waits one group commit, a few milliseconds, and a
// lane of 16 slots at 200 ms a call has about one answer being written at
// a time). Then the answers waiting form the next outcome group, and a
// group of 16 is written for little more than a group of 9. At one per
// slot the slots stayed taken behind the writes, and the lane's claims
// stayed at half its slots however long it gathered (gatherFreed); at
// four, one lane × 16 on PostgreSQL drains about 40 % more zero-latency
// jobs/s (docs/benchmarks.md, "A fourth sitting"). Eight gained nothing
// more, and each answer waiting is one a crash would lose (in memory
// only, paid for), so the bound stays small.
const answersPerSlot = 4

// callEnded frees the slot early where the store allows it and an answer
// may still be written without a slot.
func (s *slot) callEnded() {
	if s.freed || s.l.store.OutcomesClaim() {
		return
	}
	select {
	case s.l.writing <- struct{}{}:
	default:
		return // answersPerSlot × Concurrency answers already being written: keep the slot
	}
	s.writing, s.freed = true, true
	s.l.release()
}

// free ends the slot's goroutine: its answer is written (or given up).
func (s *slot) free() {
	if s.writing {
		<-s.l.writing
	}
	if !s.freed {
		s.l.release()
	}
}
