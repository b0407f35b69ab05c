package store

import (
	"context"
	"sync"
	"testing"
	"time"
)

func TestWriteGate(t *testing.T) {
	t.Parallel()
	t.Run("OutcomesGoFirst", func(t *testing.T) {
		var g writeGate
		if err := g.acquire(t.Context(), writeNormal); err != nil {
			t.Fatal(err)
		}
		order := make(chan string, 4)
		var writers sync.WaitGroup
		waiting := func(n int) {
			deadline := time.Now().Add(10 * time.Second)
			for {
				g.mu.Lock()
				got := len(g.urgent) + len(g.normal)
				g.mu.Unlock()
				if got == n {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d waiters, want %d", got, n)
				}
				time.Sleep(time.Millisecond)
			}
		}
		enter := func(name string, p writePriority) {
			defer writers.Done()
			if err := g.acquire(context.Background(), p); err != nil {
				t.Error(err)
				return
			}
			order <- name
			g.release()
		}
		writers.Add(3)
		go enter("accept-1", writeNormal)
		waiting(1)
		go enter("accept-2", writeNormal)
		waiting(2)
		go enter("complete", writeOutcome)
		waiting(3)
		g.release()
		for i, want := range []string{"complete", "accept-1", "accept-2"} {
			if got := <-order; got != want {
				t.Fatalf("writer %d = %s, want %s", i, got, want)
			}
		}
		writers.Wait()
		g.mu.Lock()
		busy := g.busy
		g.mu.Unlock()
		if busy {
			t.Errorf("gate still busy after every writer left")
		}
	})
	t.Run("CanceledWaiterHoldsNothing", func(t *testing.T) {
		var g writeGate
		if err := g.acquire(t.Context(), writeNormal); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		defer cancel()
		if err := g.acquire(ctx, writeOutcome); err == nil {
			t.Fatal("acquire on a held gate returned before its context ended")
		}
		g.release()
		g.mu.Lock()
		busy, waiters := g.busy, len(g.urgent)+len(g.normal)
		g.mu.Unlock()
		if busy || waiters != 0 {
			t.Errorf("gate busy=%v with %d waiters after the only holder left", busy, waiters)
		}
		if err := g.acquire(t.Context(), writeNormal); err != nil {
			t.Errorf("gate not free: %v", err)
		}
	})
}
