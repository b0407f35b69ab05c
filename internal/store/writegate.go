package store

import (
	"context"
	"sync"
)

// writeGate orders this process's writers on SQLite, which has one writer
// at a time: the write pool's single connection would otherwise serve them
// first come, first served, and a lane's completion (a provider answer in
// hand, already paid for) could wait behind a stream of accepts and
// heartbeats until its deadline ran out. Outcome writes (complete, fail)
// go ahead of every other waiting writer; within a class, first come,
// first served. Background work that may wait (retention's prune, see
// prune.go) queues behind both. PostgreSQL has no gate: its writers do not
// queue on one connection.
type writeGate struct {
	mu     sync.Mutex
	busy   bool
	urgent []chan struct{}
	normal []chan struct{}
	low    []chan struct{}
}

// writePriority says where a transaction queues at the gate.
type writePriority int

const (
	writeNormal  writePriority = iota
	writeOutcome               // a provider call's outcome: goes first
	writeLow                   // background work (prune): goes after every other waiter
)

// acquire waits for the gate. When ctx ends first it returns ctx's error
// and holds nothing.
func (g *writeGate) acquire(ctx context.Context, p writePriority) error {
	g.mu.Lock()
	if !g.busy {
		g.busy = true
		g.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	switch p {
	case writeOutcome:
		g.urgent = append(g.urgent, ch)
	case writeLow:
		g.low = append(g.low, ch)
	default:
		g.normal = append(g.normal, ch)
	}
	g.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	if !remove(&g.urgent, ch) && !remove(&g.normal, ch) && !remove(&g.low, ch) {
		// Handed over just as ctx ended: pass it on.
		g.mu.Unlock()
		g.release()
		return ctx.Err()
	}
	g.mu.Unlock()
	return ctx.Err()
}

// release hands the gate to the first urgent waiter, else the first
// normal one, else the first low one, else frees it.
func (g *writeGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, q := range []*[]chan struct{}{&g.urgent, &g.normal, &g.low} {
		if len(*q) > 0 {
			ch := (*q)[0]
			*q = (*q)[1:]
			close(ch)
			return
		}
	}
	g.busy = false
}

// othersWaiting says whether a writer other than background work is
// waiting for the gate: a prune batch then gives way (see pruneBatch).
func (g *writeGate) othersWaiting() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.urgent)+len(g.normal) > 0
}

func remove(q *[]chan struct{}, ch chan struct{}) bool {
	for i, c := range *q {
		if c == ch {
			*q = append((*q)[:i], (*q)[i+1:]...)
			return true
		}
	}
	return false
}
