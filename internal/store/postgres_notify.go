package store

import (
	"context"
	"database/sql"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// endNotifier tells other processes of the jobs outcome groups ended
// (PostgreSQL), just after each group's commit, from a session of its own.
// A NOTIFY inside the ending transaction would hold PostgreSQL's one
// notification lock through that transaction's durable commit, and every
// lane's outcome group would wait for every other's (docs/scaling.md,
// "Job ends across processes"). The notification writes no rows, so its
// session commits without waiting for the WAL flush; a notification lost
// in a crash costs a waiter elsewhere at most endedRecheck (listenEnded).
type endNotifier struct {
	db   *sql.DB
	log  *slog.Logger
	mu   sync.Mutex
	ids  []int64
	wake chan struct{}
	quit chan struct{}
	done chan struct{}
}

// notifyTimeout bounds one notification.
const notifyTimeout = 5 * time.Second

func newEndNotifier(dsn string, log *slog.Logger) (*endNotifier, error) {
	db, err := openSessionPool(dsn, "inkwell/notify", 1, func(ctx context.Context, c *pgconn.PgConn) error {
		return c.Exec(ctx, `SET synchronous_commit = off`).Close()
	})
	if err != nil {
		return nil, err
	}
	n := &endNotifier{db: db, log: log, wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go n.run()
	return n, nil
}

// add queues ids to be announced; it never waits.
func (n *endNotifier) add(ids []int64) {
	if len(ids) == 0 {
		return
	}
	n.mu.Lock()
	n.ids = append(n.ids, ids...)
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

func (n *endNotifier) run() {
	defer close(n.done)
	for {
		select {
		case <-n.wake:
			n.flush()
		case <-n.quit:
			n.flush()
			return
		}
	}
}

// flush announces every id queued so far, a payload per NOTIFY.
func (n *endNotifier) flush() {
	n.mu.Lock()
	ids := n.ids
	n.ids = nil
	n.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
	defer cancel()
	for _, payload := range endedPayloads(ids) {
		if _, err := n.db.ExecContext(ctx, `SELECT pg_notify('`+endedChannel+`', $1)`, payload); err != nil {
			n.log.Warn("job ends not announced; waiters in other processes find them at their next recheck", "jobs", len(ids), "err", err)
			return
		}
	}
}

// close announces what is queued and closes the session.
func (n *endNotifier) close() error {
	close(n.quit)
	<-n.done
	return n.db.Close()
}
