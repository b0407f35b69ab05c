package store

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestWriteGate_LowGoesLast: prune's transactions (writeLow) queue behind
// every outcome and every other writer that waits, whatever the order they
// came in, and a low waiter whose context ends leaves the queue.
func TestWriteGate_LowGoesLast(t *testing.T) {
	t.Parallel()
	var g writeGate
	if err := g.acquire(t.Context(), writeNormal); err != nil {
		t.Fatal(err)
	}
	waiting := func(n int) {
		deadline := time.Now().Add(10 * time.Second)
		for {
			g.mu.Lock()
			got := len(g.urgent) + len(g.normal) + len(g.low)
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
	order := make(chan string, 4)
	var writers sync.WaitGroup
	enter := func(name string, p writePriority) {
		defer writers.Done()
		if err := g.acquire(context.Background(), p); err != nil {
			t.Error(err)
			return
		}
		order <- name
		g.release()
	}
	gone, cancel := context.WithCancel(context.Background())
	writers.Add(3)
	go enter("prune", writeLow)
	waiting(1)
	leaving := make(chan error, 1)
	go func() { leaving <- g.acquire(gone, writeLow) }()
	waiting(2)
	cancel()
	if err := <-leaving; err == nil {
		t.Fatal("a low waiter whose context ended got the gate")
	}
	waiting(1)
	go enter("accept", writeNormal)
	waiting(2)
	go enter("complete", writeOutcome)
	waiting(3)
	g.release()
	for i, want := range []string{"complete", "accept", "prune"} {
		if got := <-order; got != want {
			t.Fatalf("writer %d = %s, want %s", i, got, want)
		}
	}
	writers.Wait()
	if g.busy {
		t.Error("gate still busy after every writer left")
	}
}

func TestPrunedPayload(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`{"prompt":"secret","account":"acct","max_words":7}`: `{"account":"acct","max_words":7}`,
		`{"max_words":7,"prompt":"x"}`:                       `{"max_words":7}`,
		`{"prompt":"only"}`:                                  `{}`,
		`{}`:                                                 `{}`,
		`not json`:                                           `{}`,
		`["prompt"]`:                                         `{}`,
		`null`:                                               `{}`,
		// Members that may hold what a user wrote go too; the model, the
		// limits, the sampling and the client's metadata stay.
		`{"model":"m","messages":[],"tools":[{"type":"function"}],"user":"alice@example.com","stop":["secret"],"prediction":{"content":"secret"},"response_format":{"type":"json_schema"},"max_tokens":9,"temperature":0.5,"metadata":{"t":"1"}}`: `{"max_tokens":9,"metadata":{"t":"1"},"model":"m","temperature":0.5}`,
	} {
		if got := prunedPayload(in); got != want {
			t.Errorf("prunedPayload(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestNextBatchSize(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	for _, c := range []struct {
		n          int
		held       time.Duration
		most, want int
	}{
		{100, 5 * ms, 1000, 200},  // fast: doubles, no more
		{100, 40 * ms, 1000, 50},  // twice the target: halves
		{100, 0, 1000, 200},       // unmeasurable: doubles
		{800, 1 * ms, 1000, 1000}, // never past the most
		{20, time.Second, 1000, minPruneBatch},
	} {
		if got := nextBatchSize(c.n, c.held, 20*ms, c.most); got != c.want {
			t.Errorf("nextBatchSize(%d, %s) = %d, want %d", c.n, c.held, got, c.want)
		}
	}
}
