package store

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/inkwell/inkwell"
)

// acceptBatcher is group commit for Accept (groupcommit.go).
type acceptBatcher struct {
	s *Store
	g *groupCommit[*acceptReq]
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
	b := &acceptBatcher{s: s}
	b.g = newGroupCommit(maxAcceptBatch, b.commit)
	return b
}

func (b *acceptBatcher) close() { b.g.close() }

func (b *acceptBatcher) accept(ctx context.Context, p AcceptParams) (inkwell.Job, bool, error) {
	r := &acceptReq{ctx: ctx, p: p, done: make(chan acceptRes, 1)}
	if err := b.g.hand(ctx, r); err != nil {
		return inkwell.Job{}, false, err
	}
	res := <-r.done
	return res.job, res.created, res.err
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
	ctx, cancel := context.WithTimeout(context.Background(), acceptCommitTimeout)
	defer cancel()
	now := b.s.clockArg()
	var hits acceptHits
	if b.s.dialect.groupStatements {
		rest, h, err := b.s.acceptAlone(ctx, live, now)
		if err != nil { // the database failed: the whole group fails
			for _, r := range live {
				r.done <- acceptRes{err: err}
			}
			return
		}
		live, hits = rest, h
		if len(live) == 0 {
			return
		}
	}
	before, after := hits.points()
	results := make([]acceptRes, len(live))
	err := b.s.inTxHooks(ctx, func(tx *sql.Tx) error {
		if b.s.dialect.groupStatements {
			return b.s.acceptSetTx(ctx, tx, live, now, results)
		}
		if err := b.s.lockAccountsTx(ctx, tx, accountsOf(live), nil); err != nil {
			return err
		}
		var adm admission
		if b.s.dialect.oneWriter {
			var err error
			if adm.budgeted, err = b.s.budgetedTx(ctx, tx, accountsOf(live)); err != nil {
				return err
			}
		}
		for i, r := range live {
			job, created, err := b.s.acceptOne(ctx, tx, r.p, now, &adm)
			if err := groupErrFor(r.p, err); err != nil {
				return err // the database failed: the whole group fails
			}
			results[i] = acceptRes{job: job, created: created, err: err}
		}
		return nil
	}, before, after)
	for i, r := range live {
		if err != nil {
			results[i] = acceptRes{err: err}
		}
		r.done <- results[i]
	}
}

// accountsOf is the accounts a group reserves on: their rows are locked
// first (budgets.go, lock order).
func accountsOf(reqs []*acceptReq) []string {
	out := make([]string, len(reqs))
	for i, r := range reqs {
		out[i] = r.p.account()
	}
	return out
}

// groupErrFor is groupErr for member p: its own refusal (p.Refuse, the
// API's: a body the catalog refuses, an rpm used up) is its answer alone,
// whatever its code. An EINVALID from the catalog once failed the whole
// group, every other request of it answered with that one's 400.
func groupErrFor(p AcceptParams, err error) error {
	if p.Refuse != nil && errors.Is(err, p.Refuse) {
		return nil
	}
	return groupErr(err)
}

// groupErr is err when it fails the whole group (the database failed),
// nil for a member's own answer (a key reused, a full queue, a budget).
func groupErr(err error) error {
	if code := inkwell.ErrorCode(err); err != nil && code != inkwell.EKEYREUSED && code != inkwell.ETOOMANY && code != inkwell.EBUDGET {
		return err
	}
	return nil
}
