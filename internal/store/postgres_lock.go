package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"strconv"
	"strings"
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

	fences   *sync.Map     // the store's claim fences, while this lock is one of them
	lost     chan struct{} // closed when the lock is no longer proven held
	lostOnce sync.Once
	lostErr  error
	stop     chan struct{}
	kept     sync.WaitGroup
}

// lockLanePostgres takes lane's advisory lock for this process's own lane.
func (s *Store) lockLanePostgres(ctx context.Context, lane string) (*LaneLock, error) {
	self := Holder{PID: os.Getpid(), Host: hostname(), Incarnation: newIncarnation()}
	l, err := s.lockPostgres(ctx, lane, "lane", self, true)
	if err != nil {
		return nil, err
	}
	l.Self.Since = s.now().UTC()
	l.pg.fences = &s.fences
	s.fences.Store(lane, l.pg)
	return l, nil
}

// claimFence is Claim's guard while this process holds lane's lock on
// PostgreSQL: the claim commits nothing unless, in the same statement,
// pg_locks shows the lock still held by this process's lock session. The
// keeper notices a lost lock within lockCheckEvery; this closes that
// window, so a lane whose lock session has ended cannot claim even once.
// It costs no round trip. Keys and pid are integers written into the text.
func (s *Store) claimFence(lane string) string {
	v, ok := s.fences.Load(lane)
	if !ok {
		return ""
	}
	p := v.(*pgLock)
	return fmt.Sprintf(`
		  AND EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2
		    AND classid = %d::oid AND objid = %d::oid AND pid = %d)`, uint32(laneLockNS), uint32(p.key), p.backendPID)
}

// lockPostgres opens a dedicated session and takes lane's lock on it,
// without waiting, except that a lane's own start waits out a rescuing
// lane's brief hold. role names the holder in pg_stat_activity ("lane" or
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
			l := &LaneLock{Lane: lane, Method: "pg_advisory_lock", Path: p.describe(), Self: self, pg: p}
			if keep {
				p.startKeeper()
			}
			return l, nil
		}
		if role != "lane" || held.role != "rescue" || time.Now().After(deadline) {
			return nil, held.err
		}
		select { // a rescue holds the lock for one short transaction
		case <-ctx.Done():
			return nil, held.err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// heldByError carries the refusal and whether the holder is a rescue.
type heldByError struct {
	role string
	err  error
}

func (e *heldByError) Error() string { return e.err.Error() }

func (s *Store) tryLockPostgres(ctx context.Context, lane, role string, self Holder) (*pgLock, error) {
	p, err := s.openLockSession(ctx, lane, role, self)
	if err != nil {
		return nil, err
	}
	var got bool
	if err := p.conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock($1, $2), pg_backend_pid()`, laneLockNS, p.key).Scan(&got, &p.backendPID); err != nil {
		p.close()
		return nil, s.classify(fmt.Errorf("lane %s: take advisory lock: %w", lane, err))
	}
	if !got {
		h, err := s.lockHolder(ctx, p.conn, lane)
		p.close()
		if err != nil {
			return nil, err
		}
		return nil, &heldByError{role: h.role, err: h.refusal(lane)}
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
	return &pgLock{lane: lane, key: laneLockKey(lane), db: db, conn: conn, lost: make(chan struct{}), stop: make(chan struct{})}, nil
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

// refusePooler makes sure the lock lives in a server session that belongs
// to this connection alone. A pooler in transaction mode (PgBouncer's
// pool_mode=transaction) hands the server session to whichever client
// transaction comes next: the lock would stay in a session this process
// does not own, proving nothing, and its keeper would check someone else's.
//
// Two looks: the lock session must keep its backend pid from statement to
// statement, and a second connection that opens a transaction must get a
// different backend (in transaction mode it gets the idle one that holds
// our lock). The keeper keeps checking the pid for the life of the lock,
// so a pooler that hid during these looks is caught as soon as it hands
// our session elsewhere.
func (s *Store) refusePooler(ctx context.Context, p *pgLock) error {
	var again, other int
	if err := p.conn.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&again); err != nil {
		return s.classify(fmt.Errorf("lane %s: check lock session: %w", p.lane, err))
	}
	db, conn, err := s.openSession(ctx, "inkwell/probe")
	if err != nil {
		return fmt.Errorf("lane %s: check lock session: %w", p.lane, err)
	}
	defer db.Close()
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return s.classify(fmt.Errorf("lane %s: check lock session: %w", p.lane, err))
	}
	defer tx.Rollback()
	if err := tx.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&other); err != nil {
		return s.classify(fmt.Errorf("lane %s: check lock session: %w", p.lane, err))
	}
	held, err := p.held(ctx)
	if err != nil {
		return fmt.Errorf("lane %s: check lock session: %w", p.lane, err)
	}
	if again != p.backendPID || other == p.backendPID || !held {
		s.releaseStray(ctx, p, tx)
		return inkwell.Errorf(inkwell.EINVALID, "lane %s: the advisory lock is not in a server session of its own "+
			"(lock taken by backend %d; the lock session then ran on backend %d; another connection's transaction got backend %d). "+
			"A connection pooler in transaction mode breaks session locks: point --db at PostgreSQL directly, or at a pool in session mode",
			p.lane, p.backendPID, again, other)
	}
	return nil
}

// releaseStray lets go of a lock left in a pooled server session, which
// closing our connection would not end. The unlock must run on the backend
// that holds it: the probe's transaction has it pinned when the pooler gave
// it that one, else the lock session may reach it. Should the lock still be
// there, that backend is terminated: it holds this lane's lock for no live
// holder, and the lane could never start again while the pooler kept it.
func (s *Store) releaseStray(ctx context.Context, p *pgLock, probe *sql.Tx) {
	const unlock = `SELECT pg_advisory_unlock($1, $2) FROM (SELECT 1) one WHERE pg_backend_pid() = $3`
	_, _ = probe.ExecContext(ctx, unlock, laneLockNS, p.key, p.backendPID)
	_, _ = p.conn.ExecContext(ctx, unlock, laneLockNS, p.key, p.backendPID)
	const terminate = `SELECT pg_terminate_backend(pid) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND objsubid = 2 AND pid = $3
		  AND classid = ($1::int8 & 4294967295)::oid AND objid = ($2::int8 & 4294967295)::oid`
	if _, err := s.db.ExecContext(ctx, terminate, laneLockNS, p.key, p.backendPID); err != nil {
		s.log.WarnContext(ctx, "pooled session may still hold the lane lock", "lane", p.lane, "backend_pid", p.backendPID, "err", err)
	}
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
		close(p.lost)
	})
}

// check is Check for an advisory lock: a read of the keeper's signal, cheap
// enough for every claim.
func (p *pgLock) check() error {
	select {
	case <-p.lost:
		return p.lostErr
	default:
		return nil
	}
}

// release stops the keeper, unlocks, and closes the session (closing it
// alone would release the lock; the unlock makes it immediate).
func (p *pgLock) release() error {
	if p.fences != nil {
		p.fences.CompareAndDelete(p.lane, p)
	}
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

// Lost is closed when the lane's lock is no longer proven held (PostgreSQL:
// the lock session died or lost the lock). It is nil, never closed, for a
// file lock, whose loss Check finds by looking.
func (l *LaneLock) Lost() <-chan struct{} {
	if l.pg == nil {
		return nil
	}
	return l.pg.lost
}

// BackendPID is the PostgreSQL backend that holds the lock, 0 for a file lock.
func (l *LaneLock) BackendPID() int {
	if l.pg == nil {
		return 0
	}
	return l.pg.backendPID
}

// holderAppName is the lock session's application_name, which is how a
// refused process learns who holds the lane: role, pid, incarnation and
// host, cut to PostgreSQL's 63 bytes (the host goes last, so only it is cut).
func holderAppName(role string, h Holder) string {
	name := fmt.Sprintf("inkwell/%s/%d/%s/%s", role, h.PID, h.Incarnation, h.Host)
	if len(name) > 63 {
		name = name[:63]
	}
	return name
}

// pgHolder is what the server says about the session holding a lane.
type pgHolder struct {
	role       string // "lane", "rescue", or "" for a session that is not Inkwell's
	holder     Holder
	backendPID int
	appName    string
	clientAddr string
	known      bool // a session holds it (false: it went away while we looked)
}

// lockHolder reads the holder of lane's lock from pg_locks and
// pg_stat_activity, and fills in what the lanes row knows.
func (s *Store) lockHolder(ctx context.Context, conn *sql.Conn, lane string) (pgHolder, error) {
	const q = `SELECT a.pid, COALESCE(a.application_name, ''), COALESCE(host(a.client_addr), 'local socket'), a.backend_start
		FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
		  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND l.classid = ($1::int8 & 4294967295)::oid
		  AND l.objid = ($2::int8 & 4294967295)::oid
		LIMIT 1`
	var h pgHolder
	var since time.Time
	err := conn.QueryRowContext(ctx, q, laneLockNS, laneLockKey(lane)).Scan(&h.backendPID, &h.appName, &h.clientAddr, &since)
	if errors.Is(err, sql.ErrNoRows) {
		return h, nil
	}
	if err != nil {
		return h, s.classify(fmt.Errorf("lane %s: read lock holder: %w", lane, err))
	}
	h.known = true
	h.holder.Since = since.UTC()
	h.parseAppName()
	if h.role == "lane" {
		var row LaneRow
		err := conn.QueryRowContext(ctx, `SELECT `+laneColumns+` FROM lanes WHERE name = $1`, lane).Scan(
			&row.Name, &row.Incarnation, &row.PID, &row.Host, new(nullTime), new(nullTime), new(nullTime), new(sql.NullString))
		if err == nil && row.Incarnation == h.holder.Incarnation {
			h.holder.Host = row.Host // the application name may have cut it
		}
	}
	return h, nil
}

func (h *pgHolder) parseAppName() {
	parts := strings.SplitN(h.appName, "/", 5)
	if len(parts) != 5 || parts[0] != "inkwell" {
		return
	}
	pid, err := strconv.Atoi(parts[2])
	if err != nil {
		return
	}
	h.role = parts[1]
	h.holder.PID, h.holder.Incarnation, h.holder.Host = pid, parts[3], parts[4]
}

func (h pgHolder) refusal(lane string) error {
	var who string
	switch {
	case !h.known:
		who = "a session that ended while we looked; try again"
	case h.role == "":
		who = fmt.Sprintf("a session that is not an Inkwell lane (application_name %q, backend pid %d, client %s, since %s)",
			h.appName, h.backendPID, h.clientAddr, h.holder.Since.Format(time.RFC3339))
	default:
		who = fmt.Sprintf("%s (%s session: backend pid %d, client %s)", h.holder, h.role, h.backendPID, h.clientAddr)
	}
	return inkwell.Errorf(inkwell.ELANEHELD, "lane %s is held by %s; lock pg_advisory_lock(%d, %d). "+
		"Refusing to start the lane or recover its rows while its holder is alive", lane, who, laneLockNS, laneLockKey(lane))
}
