package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Job ends across processes, for long-polls (GET /v1/jobs/{id}?wait=):
// every transaction that ends a job (completion, failure for good, cancel,
// recovery and rescue) tells WatchEnded in every process.
//
//   - PostgreSQL: pg_notify on endedChannel, which PostgreSQL delivers to
//     every session that LISTENs (WatchEnded holds one): outcome groups
//     send it just after their commit (endNotifier), the rarer ends
//     (cancel, recovery, rescue) inside their transaction (notifyEnded).
//     WatchEnded also reads the waited-for jobs every endedRecheck.
//   - SQLite: no notification crosses processes, so WatchEnded reads
//     PRAGMA data_version (a counter in shared memory that moves when
//     another connection commits) every SQLiteWatchInterval, and only when
//     it moved, reads the waited-for jobs that ended.
//
// Ends in this process wake its waiters directly, without either path
// (the lane's OnEnded, the API's cancel).

// endedChannel is the PostgreSQL NOTIFY channel of job ends. Its payload
// is job ids separated by commas, or "*" for "some jobs ended; look at
// all" (a recovery run, which does not name its jobs).
const endedChannel = "inkwell_job_ended"

// maxNotifyPayload keeps each payload under PostgreSQL's 8000-byte limit.
const maxNotifyPayload = 7900

// SQLiteWatchInterval is how often WatchEnded looks at data_version on
// SQLite: the latency of a job ended by another process (inkwell cancel).
const SQLiteWatchInterval = 250 * time.Millisecond

// notifyEnded, inside the transaction that ended ids (nil: unnamed jobs),
// tells every process listening on PostgreSQL, at commit. It is one
// statement per transaction (a few for a group of thousands), and nothing
// on SQLite.
func (s *Store) notifyEnded(ctx context.Context, tx *sql.Tx, ids []int64) error {
	if !s.dialect.notify {
		return nil
	}
	for _, payload := range endedPayloads(ids) {
		if _, err := s.txExec(ctx, tx, `SELECT pg_notify('`+endedChannel+`', $1)`, payload); err != nil {
			return fmt.Errorf("notify job ends: %w", err)
		}
	}
	return nil
}

// endedPayloads splits ids into NOTIFY payloads; nil ids is one "*".
func endedPayloads(ids []int64) []string {
	if ids == nil {
		return []string{"*"}
	}
	var out []string
	var b strings.Builder
	for _, id := range ids {
		if b.Len() > maxNotifyPayload {
			out, b = append(out, b.String()), strings.Builder{}
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(id, 10))
	}
	if b.Len() > 0 {
		out = append(out, b.String())
	}
	return out
}

// parseEnded reads a payload: the ids, or all=true for "*".
func parseEnded(payload string) (ids []int64, all bool) {
	if payload == "*" {
		return nil, true
	}
	for _, f := range strings.Split(payload, ",") {
		id, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, true // unreadable: look at all rather than miss one
		}
		ids = append(ids, id)
	}
	return ids, false
}

// WatchParams says what WatchEnded wakes and, on SQLite, which jobs it
// reads.
type WatchParams struct {
	// Wake is called with the ids of jobs that ended in some process.
	Wake func(ids []int64)
	// WakeAll is called when the ended jobs are not named (a recovery
	// run), and after the watch (re)connects, as ends may have been missed.
	WakeAll func()
	// Waiting lists the job ids someone waits for (SQLite reads only
	// those, and nothing when it is empty).
	Waiting func() []int64
}

// WatchEnded reports job ends committed by any process (this one too)
// until ctx ends; it returns ctx's error. A lost PostgreSQL session is
// reconnected after a pause (logged); SQLite errors are logged and the
// next tick tries again.
func (s *Store) WatchEnded(ctx context.Context, p WatchParams) error {
	if s.dialect.notify {
		return s.listenEnded(ctx, p)
	}
	return s.pollDataVersion(ctx, p)
}

// endedRecheck is how often, on PostgreSQL, the jobs someone waits for
// are read for ends whose notification was lost (endNotifier).
const endedRecheck = time.Second

// listenEnded LISTENs on its own session (not the pool's: LISTEN belongs
// to a session, and a pooled connection goes back to others), and every
// endedRecheck reads the waited-for jobs (recheckEnded).
func (s *Store) listenEnded(ctx context.Context, p WatchParams) error {
	go s.recheckEnded(ctx, p)
	pause := 100 * time.Millisecond
	for {
		err := s.listenOnce(ctx, p)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.log.Warn("job-end watch lost its session; long-polls answer at their wait's end until it is back", "err", err, "retry_in", pause)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, 5*time.Second)
	}
}

func (s *Store) listenOnce(ctx context.Context, p WatchParams) error {
	cfg, err := postgresConfig(s.dsn, "inkwell/listen")
	if err != nil {
		return err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+endedChannel); err != nil {
		return err
	}
	p.WakeAll() // ends before LISTEN took effect were not heard
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if ids, all := parseEnded(n.Payload); all {
			p.WakeAll()
		} else {
			p.Wake(ids)
		}
	}
}

// endedAmong is which of the jobs $1 have ended, each looked up by
// primary key: as "WHERE … AND id = ANY($1)" the plan PostgreSQL keeps
// after a few runs, made on a nearly empty table, read all of jobs, every
// second while anyone waited.
const endedAmong = `SELECT w.id FROM unnest($1::bigint[]) AS w(id)
	WHERE (SELECT j.status FROM jobs j WHERE j.id = w.id) IN ('done', 'failed')`

// recheckEnded wakes, every endedRecheck until ctx ends, the waiters of
// jobs that have ended: an end announced after its commit is lost when
// the process that committed it dies first.
func (s *Store) recheckEnded(ctx context.Context, p WatchParams) {
	every := endedRecheck
	if s.endedRecheck > 0 {
		every = s.endedRecheck
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		waiting := p.Waiting()
		if len(waiting) == 0 {
			continue
		}
		ids, err := queryAll(ctx, s, "waited-for jobs", func(r rowScanner) (id int64, err error) { return id, r.Scan(&id) }, endedAmong, waiting)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("job-end watch: recheck failed; trying again", "err", err)
			}
			continue
		}
		if len(ids) > 0 {
			p.Wake(ids)
		}
	}
}

// pollDataVersion is the SQLite watch: one connection of its own (data_version
// is per connection: it moves when any other connection commits).
func (s *Store) pollDataVersion(ctx context.Context, p WatchParams) error {
	dsn, err := sqliteDSN(s.path, Options{noCreate: true}, false)
	if err != nil {
		return err
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	t := time.NewTicker(SQLiteWatchInterval)
	defer t.Stop()
	var seen int64 = -1
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if err := s.checkEnded(ctx, db, &seen, p); err != nil && ctx.Err() == nil {
			s.log.Warn("job-end watch: read failed; trying again", "err", err)
		}
	}
}

// checkEnded reads data_version and, when it moved and someone waits,
// the waited-for jobs that are done or failed.
func (s *Store) checkEnded(ctx context.Context, db *sql.DB, seen *int64, p WatchParams) error {
	const endedAmong = `SELECT id FROM jobs WHERE status IN ('done', 'failed') AND id IN (SELECT value FROM json_each(?1))`
	var v int64
	if err := db.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&v); err != nil {
		return err
	}
	if v == *seen {
		return nil
	}
	*seen = v
	waiting := p.Waiting()
	if len(waiting) == 0 {
		return nil
	}
	list, _ := json.Marshal(waiting)
	rows, err := db.QueryContext(ctx, endedAmong, string(list))
	if err != nil {
		return err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return err
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(ids) > 0 {
		p.Wake(ids)
	}
	return nil
}
