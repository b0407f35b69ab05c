package store

// Outcome is one member of an outcome group for CommitOutcomes: a
// completion or a failure.
type Outcome struct {
	Complete *CompleteParams
	Fail     *FailParams
}

// CommitOutcomes commits os as one group, exactly as the batcher commits
// outcomes that arrived together while a commit was in flight, and
// returns each member's answer in order. Concurrent outcomes leave a
// group's members to the scheduler; this lets a test fix them.
func CommitOutcomes(s *Store, os []Outcome) []error {
	batch := make([]*outcomeReq, len(os))
	for i, o := range os {
		batch[i] = &outcomeReq{complete: o.Complete, fail: o.Fail, done: make(chan error, 1)}
	}
	s.outcomes.commit(batch)
	errs := make([]error, len(batch))
	for i, r := range batch {
		errs[i] = <-r.done
	}
	return errs
}

// IsolatedGroups is how many outcome groups had to run again with a
// savepoint per member because one of them was refused.
func IsolatedGroups(s *Store) int64 { return s.outcomes.isolated.Load() }
