package store

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/crashpoint"
)

// acceptBatcher is group commit for Accept: requests that arrive while a
// commit is in flight wait and then share the next transaction, so a burst
// of accepts costs one fsync instead of one each. A lone request is
// committed at once, so it adds no latency when the server is quiet.
type acceptBatcher struct {
	s    *Store
	reqs chan *acceptReq
	quit chan struct{}
	wg   sync.WaitGroup
}

type acceptReq struct {
	ctx  context.Context
	p    AcceptParams
	done chan acceptRes
}

type acceptRes struct {
	job     inkwell.Job
	created bool
	err     error
}

// maxAcceptBatch bounds one transaction, so one commit never holds the
// write lock for long.
const maxAcceptBatch = 256

// acceptCommitTimeout bounds one group's transaction. It does not follow
// any one caller's context: the group belongs to all of them.
const acceptCommitTimeout = 30 * time.Second

func newAcceptBatcher(s *Store) *acceptBatcher {
	b := &acceptBatcher{s: s, reqs: make(chan *acceptReq), quit: make(chan struct{})}
	b.wg.Add(1)
	go b.run()
	return b
}

func (b *acceptBatcher) close() {
	close(b.quit)
	b.wg.Wait()
}

func (b *acceptBatcher) accept(ctx context.Context, p AcceptParams) (inkwell.Job, bool, error) {
	r := &acceptReq{ctx: ctx, p: p, done: make(chan acceptRes, 1)}
	select {
	case b.reqs <- r:
	case <-ctx.Done():
		return inkwell.Job{}, false, ctx.Err()
	case <-b.quit:
		return inkwell.Job{}, false, inkwell.Errorf(inkwell.EUNAVAILABLE, "store is closing")
	}
	// Once handed over, wait for the commit's verdict even if ctx ends:
	// the caller must not report "not stored" for a row that was stored.
	res := <-r.done
	return res.job, res.created, res.err
}

func (b *acceptBatcher) run() {
	defer b.wg.Done()
	for {
		select {
		case r := <-b.reqs:
			batch := b.gather(r)
			b.commit(batch)
		case <-b.quit:
			return
		}
	}
}

// gather takes r and every request already waiting, up to maxAcceptBatch.
func (b *acceptBatcher) gather(first *acceptReq) []*acceptReq {
	batch := []*acceptReq{first}
	for len(batch) < maxAcceptBatch {
		select {
		case r := <-b.reqs:
			batch = append(batch, r)
		default:
			return batch
		}
	}
	return batch
}

func (b *acceptBatcher) commit(batch []*acceptReq) {
	live := batch[:0]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.done <- acceptRes{err: err} // the client is gone: store nothing for it
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	// Members take their accounts' budget reservations in account order, so
	// two groups (two processes on PostgreSQL) lock account rows in one
	// order and never deadlock.
	slices.SortStableFunc(live, func(a, b *acceptReq) int { return strings.Compare(a.p.Account, b.p.Account) })
	ctx, cancel := context.WithTimeout(context.Background(), acceptCommitTimeout)
	defer cancel()
	results := make([]acceptRes, len(live))
	now := b.s.nowTS()
	err := b.s.inTxHooks(ctx, func(tx *sql.Tx) error {
		var adm admission
		for i, r := range live {
			job, created, err := b.s.acceptOne(ctx, tx, r.p, now, &adm)
			if code := inkwell.ErrorCode(err); err != nil && code != inkwell.EKEYREUSED && code != inkwell.ETOOMANY && code != inkwell.EBUDGET {
				return err // the database failed: the whole group fails
			}
			results[i] = acceptRes{job: job, created: created, err: err}
		}
		return nil
	}, crashpoint.AcceptBeforeCommit, crashpoint.AcceptAfterCommit)
	for i, r := range live {
		if err != nil {
			results[i] = acceptRes{err: err}
		}
		r.done <- results[i]
	}
}
