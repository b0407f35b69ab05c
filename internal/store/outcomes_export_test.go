package store

// Outcome is one member of an outcome group for CommitOutcomes: a
// completion or a failure.
type Outcome struct {
	Complete *CompleteParams
	Fail     *FailParams
	Next     *LaneLock // ask for the slot's next job (CompleteAndClaim)
}

// CommitOutcomes commits os as one group, exactly as the batcher commits
// outcomes that arrived together while a commit was in flight, and
// returns each member's answer in order. Concurrent outcomes leave a
// group's members to the scheduler; this lets a test fix them.
func CommitOutcomes(s *Store, os []Outcome) []error {
	_, errs := CommitOutcomesNext(s, os)
	return errs
}

// CommitOutcomesNext is CommitOutcomes that also returns the job claimed
// for each member's slot (nil: none).
func CommitOutcomesNext(s *Store, os []Outcome) ([]*Claimed, []error) {
	batch := make([]*outcomeReq, len(os))
	for i, o := range os {
		batch[i] = &outcomeReq{complete: o.Complete, fail: o.Fail, next: o.Next, done: make(chan error, 1)}
	}
	s.outcomes.commit(batch)
	errs := make([]error, len(batch))
	next := make([]*Claimed, len(batch))
	for i, r := range batch {
		errs[i] = <-r.done
		next[i] = r.claimed
	}
	return next, errs
}

// IsolatedGroups is how many outcome groups had to run again with a
// savepoint per member because one of them was refused.
func IsolatedGroups(s *Store) int64 { return s.outcomes.isolated.Load() }
