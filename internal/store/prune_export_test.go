package store

import (
	"context"
	"time"
)

// PruneBatch runs one prune batch of up to n jobs, as Prune does, and says
// how many it pruned and whether it gave way to a waiting writer.
func PruneBatch(ctx context.Context, s *Store, before time.Time, n int) (got int, yielded bool, err error) {
	got, _, _, _, yielded, err = s.pruneBatch(ctx, before, n, ActorCLI, batchVerdicts{})
	return got, yielded, err
}

// PretendWriterWaits puts a writer in the gate's normal queue, as an
// accept waiting for the writer would be, without a goroutine. stop takes
// it out again, or, when the gate was handed to it, releases the gate.
// On PostgreSQL (no gate) it does nothing.
func PretendWriterWaits(s *Store) (stop func()) {
	if s.gate == nil {
		return func() {}
	}
	ch := make(chan struct{})
	g := s.gate
	g.mu.Lock()
	g.normal = append(g.normal, ch)
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		queued := remove(&g.normal, ch)
		g.mu.Unlock()
		if !queued {
			<-ch
			g.release()
		}
	}
}

// Timestamp is t as the store binds a time in its dialect.
func (s *Store) Timestamp(t time.Time) any { return s.ts(t) }
