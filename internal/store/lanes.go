package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/inkwell/inkwell"
)

// The lanes table says which incarnation holds each lane and when it last
// beat. Heartbeats are for display (is a lane alive?); the lane lock, not
// the heartbeat, decides that a holder is dead.

// LaneRow is one row of lanes.
type LaneRow struct {
	Name        string     `json:"name"`
	Incarnation string     `json:"incarnation"`
	PID         int        `json:"pid"`
	Host        string     `json:"host"`
	StartedAt   time.Time  `json:"started_at"`
	HeartbeatAt time.Time  `json:"heartbeat_at"`
	StoppedAt   *time.Time `json:"stopped_at,omitempty"`
	StopReason  string     `json:"stop_reason,omitempty"`
	// BootID and ProcStart name the holder's process on its host (see
	// process.go); empty on rows written before migration 0003.
	BootID    string `json:"boot_id,omitempty"`
	ProcStart string `json:"proc_start,omitempty"`
	// AnswersWaiting is how many provider answers the lane held, not yet
	// stored, at its last heartbeat.
	AnswersWaiting int64 `json:"answers_waiting"`
	// Slots and SlotsInUse: calls the lane may run at once, and ran at its
	// last heartbeat; PausedUntil: a provider 429 pauses it until then.
	Slots       int        `json:"slots"`
	SlotsInUse  int        `json:"slots_in_use"`
	PausedUntil *time.Time `json:"paused_until,omitempty"`
}

// RegisterLane records l's incarnation as the lane's holder, under the
// lock's fence (PostgreSQL): a lock lost by now writes nothing, so a stale
// registration can never take the row from the lane's new holder. (On
// SQLite the SELECT's WHERE is there for the grammar: an upsert from a
// SELECT needs one.)
func (s *Store) RegisterLane(ctx context.Context, l *LaneLock) error {
	fence, err := s.lockFence(l)
	if err != nil {
		return fmt.Errorf("register lane %s: %w", l.Lane, err)
	}
	upsert := `INSERT INTO lanes (name, incarnation, pid, host, started_at, heartbeat_at, boot_id, proc_start, answers_waiting)
		SELECT $1, $2, $3, $4, $5, $6, $7, $8, 0 WHERE true` + fence + `
		ON CONFLICT (name) DO UPDATE SET incarnation = excluded.incarnation, pid = excluded.pid,
			host = excluded.host, started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at,
			boot_id = excluded.boot_id, proc_start = excluded.proc_start, answers_waiting = 0,
			stopped_at = NULL, stop_reason = NULL`
	now := s.nowTS()
	return s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.dialect.rebind(upsert), l.Lane, l.Self.Incarnation, l.Self.PID, l.Self.Host, s.ts(l.Self.Since), now,
			nullString(l.Self.BootID), nullString(l.Self.ProcStart))
		if err != nil {
			return fmt.Errorf("register lane %s: %w", l.Lane, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("register lane %s: %w", l.Lane, err)
		}
		if n != 1 {
			return errLockLost(l, "registration")
		}
		return nil
	})
}

// LaneBeat is what a heartbeat says of a running lane besides "alive".
type LaneBeat struct {
	AnswersWaiting int64     // provider answers held, not stored yet (database unavailable)
	Slots          int       // calls the lane may run at once (--concurrency)
	SlotsInUse     int       // calls in flight now
	PausedUntil    time.Time // a provider 429 pauses every call until then; zero: not paused
}

// Heartbeat stamps the lane's heartbeat_at with what b says. It returns
// ECONFLICT when the row no longer names this incarnation: someone else
// holds the lane now.
func (s *Store) Heartbeat(ctx context.Context, l *LaneLock, b LaneBeat) error {
	const beat = `UPDATE lanes SET heartbeat_at = $1, answers_waiting = $4, slots = $5, slots_in_use = $6, paused_until = $7
		WHERE name = $2 AND incarnation = $3 AND stopped_at IS NULL`
	var paused any
	if !b.PausedUntil.IsZero() {
		paused = s.ts(b.PausedUntil)
	}
	now := s.nowTS()
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if err := s.execOne(ctx, tx, beat, now, l.Lane, l.Self.Incarnation, b.AnswersWaiting, max(b.Slots, 1), b.SlotsInUse, paused); err != nil {
			return fmt.Errorf("heartbeat lane %s: %w", l.Lane, err)
		}
		return nil
	})
}

// StopLane records a clean stop of this incarnation and why. A row that
// is already stopped keeps its stop: when a rescuing lane stopped it (this
// lane lost its lock and its orphans were closed), its stop_reason names
// the rescuer and the recovery run, which is the evidence that matters,
// and stopping again is no error. A row naming another incarnation is
// ECONFLICT: the lane is someone else's now.
func (s *Store) StopLane(ctx context.Context, l *LaneLock, reason string) error {
	const stop = `UPDATE lanes SET stopped_at = $1, stop_reason = $2, heartbeat_at = $1
		WHERE name = $3 AND incarnation = $4 AND stopped_at IS NULL`
	const stopped = `SELECT COUNT(*) FROM lanes WHERE name = $1 AND incarnation = $2 AND stopped_at IS NOT NULL`
	now := s.nowTS()
	return s.inTx(ctx, func(tx *sql.Tx) error {
		n, err := s.exec(ctx, tx, stop, now, reason, l.Lane, l.Self.Incarnation)
		if err != nil {
			return fmt.Errorf("stop lane %s: %w", l.Lane, err)
		}
		if n == 1 {
			return nil
		}
		var already int
		if err := s.txQueryRow(ctx, tx, stopped, l.Lane, l.Self.Incarnation).Scan(&already); err != nil {
			return fmt.Errorf("stop lane %s: %w", l.Lane, err)
		}
		if already == 0 {
			return inkwell.Errorf(inkwell.ECONFLICT, "stop lane %s: the lanes row no longer names incarnation %s", l.Lane, l.Self.Incarnation)
		}
		return nil
	})
}

// nullString stores "" as NULL.
func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }
