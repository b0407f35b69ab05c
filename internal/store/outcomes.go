package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/crashpoint"
)

// outcomeBatcher is group commit for the outcomes of provider calls
// (CompleteIfRunning, FailIfRunning): outcomes that arrive while a commit
// is in flight share the next transaction, so a lane with many calls in
// flight pays one durable commit for many answers. Each member is fenced
// by its own attempt id, and a member that is fenced out, already done or
// refused by the database (a CHECK, bad text) gets its own error and
// writes nothing, while the others commit. A database that is unavailable
// fails the whole group, and every member may try again.
//
// A group runs first as one plain transaction, its members one after the
// other. When every member succeeds, as nearly always, that transaction
// commits. When one is refused, the transaction is rolled back, nothing
// of it written, and the group runs again in a new one with a savepoint
// per member (runIsolated), where the refused member rolls back to its
// savepoint alone. A savepoint is not free on SQLite: every page a member
// changes is first copied to the sub-journal, which for a completion
// (about 16 pages of rows and indexes) spills to a temporary file; that was
// a tenth of a busy lane's CPU, paid for a refusal that almost never comes.
type outcomeBatcher struct {
	s *Store
	g *groupCommit[*outcomeReq]
	// isolated counts the groups that had to run again with a savepoint
	// per member (tests).
	isolated atomic.Int64
}

// outcomeReq is one outcome: a completion or a failure.
type outcomeReq struct {
	complete *CompleteParams
	fail     *FailParams
	// next, when set, asks the group to claim a job for the slot this
	// outcome frees, under this lane lock (claimNext); claimed is that job,
	// set before done is sent.
	next    *LaneLock
	claimed *Claimed
	done    chan error
}

// maxOutcomeBatch bounds one transaction, so one commit never holds the
// write lock for long.
const maxOutcomeBatch = 128

// outcomeCommitTimeout bounds one group's transaction. The group belongs
// to all its members, so it follows none of their contexts; a member whose
// group ran out of time gets EUNAVAILABLE-like errors and tries again.
const outcomeCommitTimeout = 10 * time.Second

// OutcomeCommitTimeout is outcomeCommitTimeout for the lane: a job claimed
// with an outcome is stamped when its group begins, and reaches its slot
// at most this long after (worker's stranded attempts).
const OutcomeCommitTimeout = outcomeCommitTimeout

func newOutcomeBatcher(s *Store) *outcomeBatcher {
	b := &outcomeBatcher{s: s}
	b.g = newGroupCommit(maxOutcomeBatch, b.commit)
	return b
}

func (b *outcomeBatcher) close() { b.g.close() }

// submit hands r to the next group and waits for its verdict.
func (b *outcomeBatcher) submit(ctx context.Context, r *outcomeReq) error {
	r.done = make(chan error, 1)
	if err := b.g.hand(ctx, r); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("wait for the writer: %w", err)
		}
		return err
	}
	return <-r.done
}

func (b *outcomeBatcher) commit(batch []*outcomeReq) {
	before, after := "", ""
	for _, r := range batch {
		if r.complete != nil { // the completion's crash points, as for a lone completion
			before, after = crashpoint.CompleteBeforeCommit, crashpoint.CompleteAfterCommit
			break
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), outcomeCommitTimeout)
	defer cancel()
	errs := make([]error, len(batch))
	completes, rest := b.split(batch)
	var t time.Time
	var now any
	if len(rest) > 0 || !b.s.dialect.groupStatements { // the set statement reads its own clock
		t = b.s.now()
		now = b.s.ts(t)
	}
	accounts, jobs := outcomeAccounts(batch)
	var next []laneClaim
	var err error
	if len(rest) == 0 && len(completes) > 0 && b.s.ends != nil {
		// Completions only, one statement (PostgreSQL): its own
		// transaction, the job ends announced after it (b.s.ends).
		err = b.s.classify(b.s.completeSetAlone(ctx, completes, before, after))
		b.s.noteWrite(err)
		if err != nil && !isGroupFailure(err) {
			err = errMemberRefused{err} // each member gets its own answer in runIsolated
			before = ""                 // hit already, as the statement was sent: once per group
		}
	} else {
		err = b.commitTx(ctx, batch, completes, rest, accounts, jobs, errs, now, t, &next, before, after)
	}
	switch {
	case errors.As(err, new(errMemberRefused)):
		b.isolated.Add(1)
		if now == nil {
			now = b.s.nowTS()
		}
		err = b.runIsolated(ctx, batch, errs, now, accounts, jobs, before, after)
	case err == nil:
		claimedNext(next)
	}
	if err == nil && b.s.ends != nil {
		b.s.ends.add(endedIn(batch, errs))
	}
	for i, r := range batch {
		if err != nil {
			errs[i] = err
		}
		r.done <- errs[i]
	}
	// The members just woken wait in this goroutine's run queue, and this
	// goroutine would keep its processor through the next group's commit
	// (CPU and syscalls, about 2 ms): with few cores they ran only after
	// it, so the group after that waited for them, the writer idle a fifth
	// of the time (a busy lane on 2 cores, docs/benchmarks.md). Yielding
	// lets them run now, here, while the writer goes on where a processor
	// is free: their next outcomes are waiting when its commit ends.
	runtime.Gosched()
}

// commitTx writes a group in one transaction: the accounts locked first,
// its completions by one statement where the dialect has it, the rest
// member by member, then the jobs its slots run next (claimNext, into
// *next). A member refused ends it with errMemberRefused.
func (b *outcomeBatcher) commitTx(ctx context.Context, batch []*outcomeReq, completes []*CompleteParams, rest []*outcomeReq,
	accounts []string, jobs []int64, errs []error, now any, t time.Time, next *[]laneClaim, before, after string) error {
	return b.s.inTxAt(ctx, writeOutcome, func(tx *sql.Tx) error {
		ctx := b.s.stmtContext(ctx)
		if err := b.s.lockAccountsTx(ctx, tx, accounts, jobs); err != nil {
			return err
		}
		if len(completes) > 0 {
			if err := b.s.completeSetTx(ctx, tx, completes); err != nil {
				if err = b.s.classify(err); !isGroupFailure(err) {
					return errMemberRefused{err} // each member gets its own answer in runIsolated
				}
				return err
			}
		}
		for _, r := range rest {
			if err := b.s.outcomeTx(ctx, tx, r, now); err != nil {
				if err = b.s.classify(err); len(batch) > 1 && !isGroupFailure(err) {
					return errMemberRefused{err}
				}
				return err // alone: the transaction is its savepoint
			}
		}
		if err := b.s.notifyEndedInTx(ctx, tx, endedIn(batch, errs)); err != nil {
			return err
		}
		var err error
		*next, err = b.claimNext(ctx, tx, batch, t)
		if err = b.s.classify(err); err != nil && !isGroupFailure(err) {
			return errMemberRefused{err} // a claim refused: the outcomes commit without it
		}
		return err
	}, before, after)
}

// split parts a group into the completions written by one set statement
// (completeSetTx, where the dialect has it) and the rest, written member
// by member.
func (b *outcomeBatcher) split(batch []*outcomeReq) (completes []*CompleteParams, rest []*outcomeReq) {
	if !b.s.dialect.groupStatements {
		return nil, batch
	}
	for _, r := range batch {
		if r.complete != nil {
			completes = append(completes, r.complete)
		} else {
			rest = append(rest, r)
		}
	}
	return completes, rest
}

// laneClaim is what an outcome group claimed for one lane's slots: the
// jobs, and the members, one per job, that run them.
type laneClaim struct {
	lock    *LaneLock
	claimed []*Claimed
	members []*outcomeReq
}

// claimNext claims, in the group's transaction tx, the jobs its members'
// slots run next: for each lane whose members asked (outcomeReq.next), up
// to one job per such member, with the claim's own statements (claimTx)
// and its checks: the lane's lock still held (a lane that lost it claims
// nothing; its outcomes commit all the same). Where a claim is one
// statement and its own transaction (PostgreSQL), nothing is claimed here.
// The claims take effect with the group's commit (claimedNext).
func (b *outcomeBatcher) claimNext(ctx context.Context, tx *sql.Tx, batch []*outcomeReq, now time.Time) ([]laneClaim, error) {
	if b.s.dialect.claimStatement {
		return nil, nil
	}
	var out []laneClaim
	for _, r := range batch {
		if r.next == nil {
			continue
		}
		i := slices.IndexFunc(out, func(c laneClaim) bool { return c.lock == r.next })
		if i < 0 {
			out, i = append(out, laneClaim{lock: r.next}), len(out)
		}
		out[i].members = append(out[i].members, r)
	}
	for i := range out {
		c := &out[i]
		if c.lock.Check() != nil { // no claim without the lock; the lane's loop sees it lost
			c.members = nil
			continue
		}
		fence, err := b.s.lockFence(c.lock)
		if err != nil {
			c.members = nil
			continue
		}
		if c.claimed, err = b.s.claimTx(ctx, tx, c.lock.Lane, fence, len(c.members), now); err != nil {
			return nil, fmt.Errorf("claim the next jobs of lane %s: %w", c.lock.Lane, err)
		}
	}
	return out, nil
}

// claimedNext hands a committed group's claims to the members that run
// them and hits the claim's crash point: these claims are committed.
func claimedNext(next []laneClaim) {
	claimed := false
	for _, c := range next {
		if len(c.claimed) == 0 {
			continue
		}
		claimed = true
		for i, cl := range c.claimed {
			c.members[i].claimed = cl
		}
	}
	if claimed {
		hit(crashpoint.ClaimAfterCommit)
	}
}

// errMemberRefused ends a group's plain transaction when one of its
// members was refused: the group runs again with savepoints.
type errMemberRefused struct{ err error }

func (e errMemberRefused) Error() string {
	return "an outcome of the group was refused: " + e.err.Error()
}

// runIsolated runs a group of several in one transaction with a
// savepoint per member: a member that is refused rolls back to its
// savepoint and gets its own error in errs, and the others commit. It
// returns the error that failed the whole group.
func (b *outcomeBatcher) runIsolated(ctx context.Context, batch []*outcomeReq, errs []error, now any,
	accounts []string, jobs []int64, before, after string) error {
	return b.s.inTxAt(ctx, writeOutcome, func(tx *sql.Tx) error {
		ctx := b.s.stmtContext(ctx)
		if err := b.s.lockAccountsTx(ctx, tx, accounts, jobs); err != nil {
			return err
		}
		for i, r := range batch {
			var groupErr error
			errs[i], groupErr = b.s.inSavepoint(ctx, tx, func() error { return b.s.outcomeTx(ctx, tx, r, now) })
			if groupErr != nil {
				return groupErr
			}
		}
		return b.s.notifyEndedInTx(ctx, tx, endedIn(batch, errs))
	}, before, after)
}

// notifyEndedInTx is notifyEnded for an outcome group: where ends are
// announced after the commit (endNotifier), nothing here.
func (s *Store) notifyEndedInTx(ctx context.Context, tx *sql.Tx, ids []int64) error {
	if s.ends != nil {
		return nil
	}
	return s.notifyEnded(ctx, tx, ids)
}

// stmtContext is the context for the statements of a group's transaction,
// which began under ctx. On SQLite, where the transaction holds the only
// write lock from its BEGIN and its statements wait for nobody, they run
// without ctx's deadline: the driver watches a statement's context with a
// goroutine of its own, started and stopped for every statement (a
// twentieth of the writer's CPU), and ctx still bounds the transaction,
// which database/sql rolls back when ctx ends (a later statement then
// fails, and the group with it, as for a deadline). On PostgreSQL a
// statement waits on the network and on row locks: it keeps ctx.
func (s *Store) stmtContext(ctx context.Context) context.Context {
	if s.dialect.oneWriter {
		return context.WithoutCancel(ctx)
	}
	return ctx
}

// endedIn lists the jobs a group ends: its members written (no error)
// that complete or fail for good (not a reschedule). Empty: none.
func endedIn(batch []*outcomeReq, errs []error) []int64 {
	ids := []int64{}
	for i, r := range batch {
		switch {
		case errs[i] != nil:
		case r.complete != nil:
			ids = append(ids, r.complete.JobID)
		case r.fail.RetryAt == nil:
			ids = append(ids, r.fail.JobID)
		}
	}
	return ids
}

func (s *Store) outcomeTx(ctx context.Context, tx *sql.Tx, r *outcomeReq, now any) error {
	if r.complete != nil {
		return s.completeTx(ctx, tx, *r.complete, now)
	}
	return s.failTx(ctx, tx, *r.fail, now)
}

// inSavepoint runs fn inside a savepoint of tx. An error of fn's own (a
// fenced or refused member) rolls back to the savepoint and is returned as
// memberErr; a database that failed (unavailable, a context ended, the
// savepoint itself refused) is groupErr, and the group must fail.
func (s *Store) inSavepoint(ctx context.Context, tx *sql.Tx, fn func() error) (memberErr, groupErr error) {
	if _, err := s.txExec(ctx, tx, "SAVEPOINT outcome"); err != nil {
		return nil, s.classify(fmt.Errorf("savepoint: %w", err))
	}
	err := fn()
	if err == nil {
		_, err := s.txExec(ctx, tx, "RELEASE SAVEPOINT outcome")
		return nil, s.classifyGroup(err)
	}
	err = s.classify(err)
	if isGroupFailure(err) {
		return nil, err
	}
	if _, rerr := s.txExec(ctx, tx, "ROLLBACK TO SAVEPOINT outcome"); rerr != nil {
		return nil, s.classify(fmt.Errorf("rollback to savepoint: %w", rerr))
	}
	if _, rerr := s.txExec(ctx, tx, "RELEASE SAVEPOINT outcome"); rerr != nil {
		return nil, s.classify(fmt.Errorf("release savepoint: %w", rerr))
	}
	return err, nil
}

func (s *Store) classifyGroup(err error) error {
	if err == nil {
		return nil
	}
	return s.classify(fmt.Errorf("release savepoint: %w", err))
}

// isGroupFailure tells a database that failed from a member it refused:
// busy, locked, full, an i/o error, a lost connection or an ended context
// fail the whole group.
func isGroupFailure(err error) bool {
	return inkwell.ErrorCode(err) == inkwell.EUNAVAILABLE || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, context.Canceled) || errors.Is(err, sql.ErrConnDone) || errors.Is(err, sql.ErrTxDone)
}

// outcomeAccounts is what a group's budget writes lock first (budgets.go,
// lock order): the accounts completions charge, and the jobs whose
// reservations may be settled or released.
func outcomeAccounts(batch []*outcomeReq) (names []string, jobs []int64) {
	for _, r := range batch {
		if r.complete != nil {
			names = append(names, r.complete.Account)
			jobs = append(jobs, r.complete.JobID)
		} else {
			jobs = append(jobs, r.fail.JobID)
		}
	}
	return names, jobs
}
