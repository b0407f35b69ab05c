package store

import (
	"context"
	"sync"

	"github.com/inkwell/inkwell"
)

// groupCommit is group commit: requests that arrive while a commit is in
// flight wait and share the next transaction (up to max), so a burst costs
// one durable commit instead of one each; a lone request is committed at
// once. Accepts (accept.go) and outcomes (outcomes.go) each run one; how a
// request learns its verdict is the request's own.
type groupCommit[R any] struct {
	reqs   chan R
	quit   chan struct{}
	wg     sync.WaitGroup
	max    int
	commit func(batch []R)
}

func newGroupCommit[R any](max int, commit func(batch []R)) *groupCommit[R] {
	g := &groupCommit[R]{reqs: make(chan R), quit: make(chan struct{}), max: max, commit: commit}
	g.wg.Add(1)
	go g.run()
	return g
}

func (g *groupCommit[R]) close() {
	close(g.quit)
	g.wg.Wait()
}

// hand gives r to the next group. An error says r was never taken: ctx
// ended first, or the store is closing. Once it is taken the caller waits
// for its verdict whatever ctx does: it must not report "not stored" for
// a row that was stored.
func (g *groupCommit[R]) hand(ctx context.Context, r R) error {
	select {
	case g.reqs <- r:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-g.quit:
		return inkwell.Errorf(inkwell.EUNAVAILABLE, "store is closing")
	}
}

func (g *groupCommit[R]) run() {
	defer g.wg.Done()
	for {
		select {
		case r := <-g.reqs:
			g.commit(g.gather(r))
		case <-g.quit:
			return
		}
	}
}

// gather takes first and every request already waiting, up to max.
func (g *groupCommit[R]) gather(first R) []R {
	batch := []R{first}
	for len(batch) < g.max {
		select {
		case r := <-g.reqs:
			batch = append(batch, r)
		default:
			return batch
		}
	}
	return batch
}
