package providersim

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// billing is the ledger's group commit. One goroutine writes the ledger:
// bills that arrive while a commit is in flight wait and share the next
// transaction (up to maxBillGroup), so a burst of answered calls costs one
// fsync instead of one each; a lone bill is committed at once. Each call
// learns its verdict only after the commit of the transaction that holds
// its bill, so the handlers keep their order: billed (durably), then
// answered.
//
// A bill that fails on its own (a key reused for another request, a
// constraint) fails its own call only: every bill writes with one
// statement at most (ledger.go), and SQLite undoes a failed statement
// without ending the transaction. Any other error (begin, I/O, a full
// disk, the commit itself) fails the whole group, unbilled.
type billing struct {
	db        *sql.DB
	reqs      chan *billReq
	quit      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
}

// maxBillGroup bounds the bills in one transaction.
const maxBillGroup = 256

// billCommitTimeout bounds one group's transaction. A group belongs to all
// its members, so it follows none of their contexts.
const billCommitTimeout = 10 * time.Second

// errLedgerClosing: the server closed before the bill was taken; nothing
// was billed.
var errLedgerClosing = errors.New("bill: ledger is closing")

// billReq is one call's bill: each for a messages call (billEach), else a
// chat completion (bill).
type billReq struct {
	e    entry
	each bool
	now  time.Time
	done chan billed // buffered: the writer never waits on a caller
}

// billed is a bill's verdict: the row to answer with, whether this call
// was the one billed, or why nothing was billed for it.
type billed struct {
	stored entry
	billed bool
	err    error
}

func newBilling(db *sql.DB) *billing {
	b := &billing{db: db, reqs: make(chan *billReq), quit: make(chan struct{})}
	b.wg.Add(1)
	go b.run()
	return b
}

// close stops the writer once its group in flight, if any, has committed
// and answered. A bill not yet taken gets errLedgerClosing. Safe to call
// more than once.
func (b *billing) close() {
	b.closeOnce.Do(func() { close(b.quit) })
	b.wg.Wait()
}

// submit hands a bill to the writer and waits for its verdict. ctx bounds
// only the wait to be taken: once taken, the bill is committed or not
// with its group, and the caller must hear which.
func (b *billing) submit(ctx context.Context, e entry, each bool, now time.Time) billed {
	r := &billReq{e: e, each: each, now: now, done: make(chan billed, 1)}
	select {
	case b.reqs <- r:
	case <-ctx.Done():
		return billed{err: fmt.Errorf("bill: wait for the ledger writer: %w", ctx.Err())}
	case <-b.quit:
		return billed{err: errLedgerClosing}
	}
	return <-r.done
}

func (b *billing) run() {
	defer b.wg.Done()
	for {
		select {
		case r := <-b.reqs:
			b.commit(b.gather(r))
		case <-b.quit:
			return
		}
	}
}

// gather takes first and every bill already waiting, up to maxBillGroup.
func (b *billing) gather(first *billReq) []*billReq {
	group := []*billReq{first}
	for len(group) < maxBillGroup {
		select {
		case r := <-b.reqs:
			group = append(group, r)
		default:
			return group
		}
	}
	return group
}

// commit writes a group in one transaction and then answers each member.
func (b *billing) commit(group []*billReq) {
	verdicts, err := b.write(group)
	for i, r := range group {
		if err != nil {
			r.done <- billed{err: err}
			continue
		}
		r.done <- verdicts[i]
	}
}

func (b *billing) write(group []*billReq) (_ []billed, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), billCommitTimeout)
	defer cancel()
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("bill: begin: %w", err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	verdicts := make([]billed, len(group))
	for i, r := range group {
		v := &verdicts[i]
		if r.each {
			v.stored, v.err = billEach(ctx, tx, r.e, r.now)
			v.billed = v.err == nil
		} else {
			v.stored, v.billed, v.err = bill(ctx, tx, r.e, r.now)
		}
		if v.err != nil && !ownFailure(v.err) {
			return nil, v.err
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("bill: commit: %w", err)
	}
	return verdicts, nil
}

// ownFailure reports whether a bill's error leaves its group's
// transaction as it was before the bill: a refused key, or a constraint,
// which SQLite rolls back with its one statement.
func ownFailure(err error) bool {
	if errors.Is(err, errKeyReused) {
		return true
	}
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CONSTRAINT
}
