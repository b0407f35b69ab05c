package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Reads of the lanes table (and of lane_liveness, its view), in one place.
// Writes to it are in lanes.go.

// Lanes returns every lane row, by name.
func (s *Store) Lanes(ctx context.Context) ([]LaneRow, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+laneColumns+` FROM lanes ORDER BY name`)
	if err != nil {
		return nil, s.classify(fmt.Errorf("lanes: %w", err))
	}
	defer rows.Close()
	var lanes []LaneRow
	for rows.Next() {
		l, err := scanLane(rows)
		if err != nil {
			return nil, err
		}
		lanes = append(lanes, l)
	}
	return lanes, rows.Err()
}

const laneColumns = `name, incarnation, pid, host, started_at, heartbeat_at, stopped_at, stop_reason, boot_id, proc_start, answers_waiting,
	slots, slots_in_use, paused_until`

func scanLane(row rowScanner) (LaneRow, error) {
	var l LaneRow
	var started, beat, stopped, paused nullTime
	var reason, boot, pstart sql.NullString
	err := row.Scan(&l.Name, &l.Incarnation, &l.PID, &l.Host, &started, &beat, &stopped, &reason, &boot, &pstart, &l.AnswersWaiting,
		&l.Slots, &l.SlotsInUse, &paused)
	l.StartedAt, l.HeartbeatAt, l.StoppedAt, l.StopReason = started.Time, beat.Time, stopped.Ptr(), reason.String
	l.PausedUntil = paused.Ptr()
	l.BootID, l.ProcStart = boot.String, pstart.String
	return l, err
}

// laneRow reads one lane's row from the read pool; nil when the lane never
// registered.
func (s *Store) laneRow(ctx context.Context, name string) (*LaneRow, error) {
	return s.laneTx(ctx, s.rdb, name)
}

func (s *Store) laneTx(ctx context.Context, q queryer, name string) (*LaneRow, error) {
	l, err := scanLane(q.QueryRowContext(ctx, s.dialect.rebind(`SELECT `+laneColumns+` FROM lanes WHERE name = $1`), name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lane %s: %w", name, err)
	}
	return &l, nil
}

// LaneHasTrace says whether anything here names lane: its lanes row, a
// running job or attempt on it (or a legacy running job of no lane), a
// recovery run. A lane with no trace never ran here, so recovering it
// could prove nothing and change nothing: `inkwell recover --lane` with a
// mistyped name is refused before it writes a lock file or a run.
func (s *Store) LaneHasTrace(ctx context.Context, lane string) (bool, error) {
	// Each probe reads an index: the lanes key, the running-rows partial
	// indexes (jobs_running, job_attempts_running_lane), and recovery_runs,
	// one row per start.
	const q = `SELECT CASE WHEN EXISTS (SELECT 1 FROM lanes WHERE name = $1)
		OR EXISTS (SELECT 1 FROM jobs WHERE status = 'running' AND (lane = $1 OR lane IS NULL))
		OR EXISTS (SELECT 1 FROM job_attempts WHERE status = 'running' AND lane = $1)
		OR EXISTS (SELECT 1 FROM recovery_runs WHERE lane = $1) THEN 1 ELSE 0 END`
	var n int
	if err := s.rdb.QueryRowContext(ctx, s.dialect.rebind(q), lane).Scan(&n); err != nil {
		return false, s.classify(fmt.Errorf("lane %s: look for its trace: %w", lane, err))
	}
	return n == 1, nil
}

// LiveLanes returns every lane with its liveness (lane_liveness), by name:
// alive ones and the others, so a caller can show why a lane is not alive.
func (s *Store) LiveLanes(ctx context.Context) ([]LaneState, error) {
	const q = `SELECT lane, state, alive, heartbeat_age_seconds, heartbeat_age, running_jobs,
		heartbeat_at, pid, host, incarnation, started_at, stopped_at, stop_reason, answers_waiting,
		slots, slots_in_use, paused_until
		FROM lane_liveness ORDER BY lane`
	rows, err := s.rdb.QueryContext(ctx, q)
	if err != nil {
		return nil, s.classify(fmt.Errorf("lanes: %w", err))
	}
	defer rows.Close()
	out := []LaneState{}
	for rows.Next() {
		var l LaneState
		var beat, started, stopped, paused nullTime
		var reason sql.NullString
		if err := rows.Scan(&l.Lane, &l.State, &l.Alive, &l.HeartbeatAgeSeconds, &l.HeartbeatAge, &l.RunningJobs,
			&beat, &l.PID, &l.Host, &l.Incarnation, &started, &stopped, &reason, &l.AnswersWaiting,
			&l.Slots, &l.SlotsInUse, &paused); err != nil {
			return nil, fmt.Errorf("lanes: %w", err)
		}
		l.HeartbeatAt, l.StartedAt, l.StoppedAt, l.StopReason = beat.Time, started.Time, stopped.Ptr(), reason.String
		l.PausedUntil = paused.Ptr()
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, s.classify(fmt.Errorf("lanes: %w", err))
	}
	return out, nil
}

// LanesWithRunning returns, by name, the lanes other than except that own
// running attempts: the only lanes whose death would leave orphans.
func (s *Store) LanesWithRunning(ctx context.Context, except string) ([]string, error) {
	// Reads the job_attempts_running_lane partial index only.
	const q = `SELECT DISTINCT lane FROM job_attempts WHERE status = 'running' AND lane IS NOT NULL AND lane <> $1 ORDER BY lane`
	rows, err := s.rdb.QueryContext(ctx, s.dialect.rebind(q), except)
	if err != nil {
		return nil, s.classify(fmt.Errorf("lanes with running attempts: %w", err))
	}
	defer rows.Close()
	var lanes []string
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			return nil, err
		}
		lanes = append(lanes, l)
	}
	return lanes, rows.Err()
}

// AttemptRef names one attempt and its job.
type AttemptRef struct{ ID, JobID int64 }

// RunningAttemptsOf lists the attempts running on lane that started
// before the store's clock less age, oldest first: what a lane holding
// the lane's lock compares with the calls it runs (worker: a claim whose
// commit landed but whose answer the lane never got).
func (s *Store) RunningAttemptsOf(ctx context.Context, lane string, age time.Duration) ([]AttemptRef, error) {
	before := s.ts(s.now().Add(-age))
	rows, err := s.rdb.QueryContext(ctx, s.dialect.rebind(`SELECT id, job_id FROM job_attempts
		WHERE status = 'running' AND lane = $1 AND started_at < $2 ORDER BY id`), lane, before)
	if err != nil {
		return nil, s.classify(fmt.Errorf("running attempts of lane %s: %w", lane, err))
	}
	defer rows.Close()
	var out []AttemptRef
	for rows.Next() {
		var a AttemptRef
		if err := rows.Scan(&a.ID, &a.JobID); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}
