package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// On PostgreSQL the lane lock is a session advisory lock keyed by the lane
// name, held on a connection of its own for the life of the process. The
// server releases it when the holder's session ends, however it ends (the
// process died, its host died, or the network cut it off), so taking it
// proves that no live session holds the lane.
//
// How long a dead client's lock can linger is bounded by TCP keepalives on
// that session, set on both ends: the server probes an idle client after
// keepaliveIdle and drops it after keepaliveCount unanswered probes, about
// 25 seconds in all; the client does the same towards the server, so a lane
// cut off from its database learns it has lost its lock in the same time.
//
// Fencing: a keeper goroutine checks every lockCheckEvery that the session
// is alive and still holds the lock, and closes Lost() when it does not.
// Check, which the lane calls before every claim, only reads that signal.
// The writes that must not outlive the lock carry its fence in their own
// statement (postgres_fence.go). Pooler refusal: postgres_pooler.go; how a
// refusal names the holder: postgres_holder.go.

const (
	keepaliveIdle     = 10 * time.Second
	keepaliveInterval = 5 * time.Second
	keepaliveCount    = 3
	// lockCheckEvery is how often the keeper proves the lock is still held.
	lockCheckEvery = time.Second
	// lockCheckTimeout bounds one proof; a session that cannot answer in
	// this time is treated as lost (and pgx closes a cancelled connection).
	lockCheckTimeout = 5 * time.Second
	// rescueWait is how long a starting lane waits for a rescuing lane that
	// holds its lock for a moment while it closes the lane's orphans.
	rescueWait = 5 * time.Second
)

// laneLockNS is the first key of every lane's advisory lock ('inkw'), so
// Inkwell's locks are easy to find in pg_locks (classid) and never meet
// another application's single-key locks. The second key hashes the name.
const laneLockNS int32 = 0x696e6b77

// laneLockKey is the lane's second advisory key: FNV-1a of its name, which
// (unlike hashtext) no PostgreSQL upgrade can change.
func laneLockKey(lane string) int32 {
	h := fnv.New32a()
	h.Write([]byte("lane:" + lane))
	return int32(h.Sum32())
}

// pgLock is the session that holds one lane's advisory lock.
type pgLock struct {
	lane       string
	key        int32
	db         *sql.DB // a pool of one, for this session alone
	conn       *sql.Conn
	backendPID int
	// backendStart is when the lock's backend started: with the pid it
	// names the session for good, since PostgreSQL reuses pids.
	backendStart time.Time
	keeper       bool // a keeper proves the lock every lockCheckEvery

	lostCh   chan struct{} // closed when the lock is no longer proven held
	lostOnce sync.Once
	lostErr  error
	stop     chan struct{}
	kept     sync.WaitGroup
}

// lockLanePostgres takes lane's advisory lock for this process's own lane.
func (s *Store) lockLanePostgres(ctx context.Context, lane string) (*LaneLock, error) {
	self := newHolder()
	l, err := s.lockPostgres(ctx, lane, "lane", self, true)
	if err != nil {
		return nil, err
	}
	l.Self.Since = s.now().UTC()
	return l, nil
}

// lockPostgres opens a dedicated session and takes lane's lock on it,
// without waiting, except that a lane's own start waits out a rescuing
// lane's brief hold, and any start a holder whose session is ending. role names the holder in pg_stat_activity ("lane" or
// "rescue"); keep starts the keeper.
func (s *Store) lockPostgres(ctx context.Context, lane, role string, self Holder, keep bool) (*LaneLock, error) {
	deadline := time.Now().Add(rescueWait)
	for {
		p, err := s.tryLockPostgres(ctx, lane, role, self)
		var held *heldByError
		if !errors.As(err, &held) {
			if err != nil {
				return nil, err
			}
			l := &LaneLock{Lane: lane, Method: "pg_advisory_lock", Path: p.describe(), Self: self, hold: p}
			if keep {
				p.startKeeper()
			}
			return l, nil
		}
		// Worth another try, for a moment: a rescue's short hold, and a
		// holder whose session ended while it was looked up (a process just
		// killed: the server ends its session a moment later).
		brief := role == "lane" && held.role == "rescue" || held.gone
		if !brief || time.Now().After(deadline) {
			return nil, held.err
		}
		select {
		case <-ctx.Done():
			return nil, held.err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// heldByError carries the refusal, whether the holder is a rescue, and
// whether its session was gone by the time it was looked up.
type heldByError struct {
	role string
	gone bool
	err  error
}

func (e *heldByError) Error() string { return e.err.Error() }

func (s *Store) tryLockPostgres(ctx context.Context, lane, role string, self Holder) (*pgLock, error) {
	p, err := s.openLockSession(ctx, lane, role, self)
	if err != nil {
		return nil, err
	}
	var got bool
	const take = `SELECT pg_try_advisory_lock($1, $2), pg_backend_pid(),
		(SELECT backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid())`
	if err := p.conn.QueryRowContext(ctx, take, laneLockNS, p.key).Scan(&got, &p.backendPID, &p.backendStart); err != nil {
		p.close()
		return nil, s.classify(fmt.Errorf("lane %s: take advisory lock: %w", lane, err))
	}
	if !got {
		h, err := s.lockHolder(ctx, p.conn, lane)
		p.close()
		if err != nil {
			return nil, err
		}
		return nil, &heldByError{role: h.role, gone: !h.known, err: h.refusal(lane)}
	}
	if err := s.refusePooler(ctx, p); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// openLockSession opens the dedicated session. Its application_name
// identifies the holder to a process that is refused, and its server-side
// keepalives bound how long the lock outlives a dead client.
func (s *Store) openLockSession(ctx context.Context, lane, role string, self Holder) (*pgLock, error) {
	db, conn, err := s.openSession(ctx, holderAppName(role, self))
	if err != nil {
		return nil, fmt.Errorf("lane %s: open lock session: %w", lane, err)
	}
	const keepalives = `SELECT set_config('tcp_keepalives_idle', $1, false), set_config('tcp_keepalives_interval', $2, false),
		set_config('tcp_keepalives_count', $3, false), set_config('tcp_user_timeout', $4, false)`
	_, err = conn.ExecContext(ctx, keepalives, strconv.Itoa(int(keepaliveIdle.Seconds())), strconv.Itoa(int(keepaliveInterval.Seconds())),
		strconv.Itoa(keepaliveCount), strconv.Itoa(int((keepaliveIdle + keepaliveCount*keepaliveInterval).Milliseconds())))
	if err != nil {
		conn.Close()
		db.Close()
		return nil, s.classify(fmt.Errorf("lane %s: set lock session keepalives: %w", lane, err))
	}
	return &pgLock{lane: lane, key: laneLockKey(lane), db: db, conn: conn, lostCh: make(chan struct{}), stop: make(chan struct{})}, nil
}

// openSession opens one connection of its own, outside the pool. It speaks
// the simple query protocol: every statement is one message, so even
// through a pooler in transaction mode each one arrives whole, and the
// pooler check below gets an answer instead of a prepared-statement error.
// Keepalives are set by statement, not in the startup packet, which
// poolers refuse for parameters they do not know.
func (s *Store) openSession(ctx context.Context, appName string) (*sql.DB, *sql.Conn, error) {
	cfg, err := postgresConfig(s.dsn, appName)
	if err != nil {
		return nil, nil, err
	}
	cfg.RuntimeParams["application_name"] = appName
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, nil, s.classify(err)
	}
	return db, conn, nil
}

// held reports whether this session, still the backend that took the lock,
// holds it. Two-key advisory locks show in pg_locks with classid = key 1,
// objid = key 2 (as unsigned oids) and objsubid = 2.
func (p *pgLock) held(ctx context.Context) (bool, error) {
	const q = `SELECT pg_backend_pid() = $3 AND EXISTS (SELECT 1 FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND objsubid = 2
		  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND classid = ($1::int8 & 4294967295)::oid
		  AND objid = ($2::int8 & 4294967295)::oid
		  AND pid = $3)`
	var held bool
	err := p.conn.QueryRowContext(ctx, q, laneLockNS, p.key, p.backendPID).Scan(&held)
	return held, err
}

func (p *pgLock) describe() string {
	return fmt.Sprintf("pg_advisory_lock(%d, %d), PostgreSQL backend pid %d", laneLockNS, p.key, p.backendPID)
}

func (p *pgLock) startKeeper() {
	p.keeper = true
	p.kept.Add(1)
	go p.keep()
}

// keep proves, every lockCheckEvery, that this session is alive, is the
// same session, and still holds the lock; the first failure closes lost
// for good. A lane never gets its lock back in place: it stops, and a new
// incarnation takes the lock and recovers.
func (p *pgLock) keep() {
	defer p.kept.Done()
	t := time.NewTicker(lockCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		if err := p.verify(); err != nil {
			p.markLost(err)
			return
		}
	}
}

func (p *pgLock) verify() error {
	ctx, cancel := context.WithTimeout(context.Background(), lockCheckTimeout)
	defer cancel()
	held, err := p.held(ctx)
	if err != nil {
		return inkwell.Errorf(inkwell.ELANEHELD, "lane %s: lock session lost (%v); stopping the lane", p.lane, err)
	}
	if !held {
		return inkwell.Errorf(inkwell.ELANEHELD, "lane %s: the lock session is no longer backend %d holding the advisory lock "+
			"(lost, or moved by a connection pooler); stopping the lane", p.lane, p.backendPID)
	}
	return nil
}

func (p *pgLock) markLost(err error) {
	p.lostOnce.Do(func() {
		p.lostErr = err
		close(p.lostCh)
	})
}

// check is Check for an advisory lock: a read of the keeper's signal, cheap
// enough for every claim. A lock without a keeper (a rescue's brief hold)
// is proven on the spot instead, one round trip on its session.
func (p *pgLock) check(*LaneLock) error {
	select {
	case <-p.lostCh:
		return p.lostErr
	default:
	}
	if p.keeper {
		return nil
	}
	if err := p.verify(); err != nil {
		p.markLost(err)
		return err
	}
	return nil
}

// release stops the keeper, unlocks, and closes the session (closing it
// alone would release the lock; the unlock makes it immediate).
func (p *pgLock) release(*LaneLock) error {
	close(p.stop)
	p.kept.Wait()
	p.markLost(inkwell.Errorf(inkwell.ELANEHELD, "lane %s: lock was released", p.lane))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = p.conn.ExecContext(ctx, `SELECT pg_advisory_unlock($1, $2)`, laneLockNS, p.key)
	return p.close()
}

func (p *pgLock) close() error {
	return errors.Join(p.conn.Close(), p.db.Close())
}

// BackendPID is the PostgreSQL backend that holds the lock, 0 for a file lock.
func (l *LaneLock) BackendPID() int {
	if p, ok := l.hold.(*pgLock); ok {
		return p.backendPID
	}
	return 0
}

func (p *pgLock) lost() <-chan struct{} { return p.lostCh }

// takenFromLive: nobody can take a session advisory lock from a live
// session, so a granted lock proves its previous holder's session gone,
// but not its process: a session killed by hand (pg_terminate_backend) or
// cut from its process by the network leaves the process running, its
// calls in flight and their answers still to be stored. Where that process
// is on this host and alive, recovery must not close its attempts under
// it. This very process's earlier holder is not such a case: a lane that
// lost its lock stops and never takes it again in the same process.
func (p *pgLock) takenFromLive(h Holder) string {
	if h.PID == os.Getpid() && h.Host == hostname() {
		return ""
	}
	return "its lock session ended (killed, or its connection lost) while its process runs; that process claims nothing more " +
		"and exits once its calls in flight have ended and their answers are stored"
}

func (p *pgLock) proof(l *LaneLock) string { return advisoryProof(l) }
