package store

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Operator reads. The answers come from the views (job_overview,
// job_board, lane_liveness and the one-row queue_state they share), so an
// operator typing SELECT * FROM job_overview in sqlite3 or psql sees
// exactly what inkwell status, /metrics and the dashboard show. The views
// compare against the database's wall clock, not the store's NowFunc.
//
// The views were first written by migration 0002; migration 0004
// (0004_overview_counts.sql, one per dialect) replaced them so that their
// cost does not grow with the history: job_overview reads the counts that
// triggers keep in job_counts, in the same transaction as each write, and
// one index probe per status for the oldest job. Migration 0006
// (0006_views_by_class.sql) made them decide on each failure's class
// (error_class), never on its wording: job_counts keeps one kind per failed
// class, and the next actions are the class's; jobs waiting out a back-off,
// given up, cancelled, pruned and possible poison jobs have their own.
// Migration 0014 (0014_views_in_claim_order.sql) made them read the queue
// in claim order, (claim_turn, id), as lanes claim since 0013: the queue's
// head, "N queued ahead" and the board's order of queued jobs. A later
// change to their words comes as a new migration.

// OverviewRow is one row of job_overview: one status. (The store's types
// carry no wire format: the HTTP API's forms are in api/wire.go.)
type OverviewRow struct {
	Status           string
	Jobs             int64
	OldestJobID      *int64 // the job longest in this status; nil for done and when empty
	OldestAgeSeconds *int64 // nil when empty
	OldestAge        string // e.g. "3m07s"
	NextAction       string
}

// BoardRow is one row of job_board: a job that is not done.
type BoardRow struct {
	ID         int64
	Status     string
	Lane       string
	Attempt    int // highest attempt number; 0 before the first claim
	Since      *time.Time
	AgeSeconds *int64
	Age        string
	Error      string
	NextAction string
	// ErrorClass is the class of the failure that ended a failed job, or
	// that a queued job waits out after an automatic retry put it back;
	// empty otherwise (docs/design.md §9). next_action is decided on it.
	ErrorClass string
	// PrunedAt is when retention removed a failed job's prompt: it cannot
	// run again. The board lists such jobs after the other failed ones.
	PrunedAt *time.Time
}

// LaneState is one row of lane_liveness.
type LaneState struct {
	Lane                string
	State               string // alive, silent or stopped
	Alive               bool
	HeartbeatAgeSeconds int64
	HeartbeatAge        string
	RunningJobs         int64
	HeartbeatAt         time.Time
	PID                 int
	Host                string
	Incarnation         string
	StartedAt           time.Time
	StoppedAt           *time.Time
	StopReason          string
	// AnswersWaiting is what the lane said at its last heartbeat: provider
	// answers it holds and could not store yet (database busy, locked or
	// full). A restart would lose them.
	AnswersWaiting int64
	// Slots is how many calls the lane may run at once; SlotsInUse how many
	// it ran at its last heartbeat; PausedUntil, when set, is when a
	// provider's 429 stops holding its calls.
	Slots       int
	SlotsInUse  int
	PausedUntil *time.Time
}

// Overview returns job_overview: four rows, queued, running, failed, done.
func (s *Store) Overview(ctx context.Context) ([]OverviewRow, error) {
	const q = `SELECT status, jobs, oldest_job_id, oldest_age_seconds, oldest_age, next_action FROM job_overview`
	rows, err := s.rdb.QueryContext(ctx, q)
	if err != nil {
		return nil, s.classify(fmt.Errorf("overview: %w", err))
	}
	defer rows.Close()
	var out []OverviewRow
	for rows.Next() {
		var r OverviewRow
		var oldestID, age sql.NullInt64
		var ageText sql.NullString
		if err := rows.Scan(&r.Status, &r.Jobs, &oldestID, &age, &ageText, &r.NextAction); err != nil {
			return nil, fmt.Errorf("overview: %w", err)
		}
		r.OldestJobID, r.OldestAgeSeconds, r.OldestAge = nullInt(oldestID), nullInt(age), ageText.String
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.classify(fmt.Errorf("overview: %w", err))
	}
	return out, nil
}

// StatusCount is one row of job_overview without its next action: what
// /metrics reads at every scrape.
type StatusCount struct {
	Status           string
	Jobs             int64
	OldestAgeSeconds *int64 // nil when empty
}

// StatusCounts returns job_overview's counts and oldest ages, in its order
// (queued, running, failed, done), leaving out the next actions and the
// reads they take (lanes, the queue's head, the running jobs).
func (s *Store) StatusCounts(ctx context.Context) ([]StatusCount, error) {
	const q = `SELECT status, jobs, oldest_age_seconds FROM job_overview`
	rows, err := s.rdb.QueryContext(ctx, q)
	if err != nil {
		return nil, s.classify(fmt.Errorf("status counts: %w", err))
	}
	defer rows.Close()
	var out []StatusCount
	for rows.Next() {
		var c StatusCount
		var age sql.NullInt64
		if err := rows.Scan(&c.Status, &c.Jobs, &age); err != nil {
			return nil, fmt.Errorf("status counts: %w", err)
		}
		c.OldestAgeSeconds = nullInt(age)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, s.classify(fmt.Errorf("status counts: %w", err))
	}
	return out, nil
}

// boardPickMax is the largest limit for which Board picks its rows by id
// first; a larger one reads the view in order, as a full read does.
const boardPickMax = 1000

// boardStatuses is job_board's order: running, then queued, then failed.
var boardStatuses = []string{"running", "queued", "failed"}

// boardOrder is job_board's order, over its columns: running, queued in
// claim order (claim_turn, then id: claim_fair.go), failed, and last the
// failed jobs retention pruned (nothing is left to do with them), the
// others by id (their claim_turn is NULL).
const boardOrder = `CASE WHEN status = 'running' THEN 1 WHEN status = 'queued' THEN 2 WHEN pruned_at IS NULL THEN 3 ELSE 4 END, claim_turn, id`

// Board returns up to limit rows of job_board (running first, then queued
// in claim order, then failed), only of the given statuses when any are
// named. A limit of 0 or less means every row.
//
// With a limit, it first picks the ids to show from the statuses' partial
// indexes (the running jobs, then the first queued ones in claim order and
// the first failed ones by id),
// then reads only those rows of job_board, in one snapshot: the view
// numbers a queued job's place by counting on the index near the queue's
// head, so the first rows cost the same however long the queue is, where
// "ORDER BY … LIMIT" on the view would make it compute every row first.
func (s *Store) Board(ctx context.Context, limit int, statuses ...string) ([]BoardRow, error) {
	if limit <= 0 || limit > boardPickMax {
		return s.boardInOrder(ctx, limit, statuses)
	}
	tx, err := s.rdb.BeginTx(ctx, s.dialect.snapshot)
	if err != nil {
		return nil, s.classify(fmt.Errorf("board: %w", err))
	}
	defer tx.Rollback()
	ids, err := s.boardPick(ctx, tx, limit, statuses)
	if err != nil || len(ids) == 0 {
		return []BoardRow{}, s.classify(err)
	}
	list := make([]string, len(ids))
	for i, id := range ids {
		list[i] = strconv.FormatInt(id, 10)
	}
	q := `SELECT id, status, lane, attempt, since, age_seconds, age, error, next_action, error_class, pruned_at FROM job_board
		WHERE id IN (` + strings.Join(list, ", ") + `)
		ORDER BY ` + boardOrder
	rows, err := tx.QueryContext(ctx, q)
	if err != nil {
		return nil, s.classify(fmt.Errorf("board: %w", err))
	}
	out, err := scanBoard(rows)
	return out, s.classify(err)
}

// boardPick returns the ids of the first limit rows of job_board among
// statuses (all three when none are named), in the board's order. Each
// status is read from its own partial index: every running job (there
// are as many as lanes, give or take; sorted here, since an ORDER BY id
// could tempt a planner without statistics to walk the whole table in id
// order), the first limit queued jobs in claim order (claim_turn, then
// id, on jobs_queued_turn: the order lanes take them in, where an old id
// retried or rescheduled has a late turn), and the first limit failed
// jobs that are not pruned, then the first limit pruned ones.
func (s *Store) boardPick(ctx context.Context, tx *sql.Tx, limit int, statuses []string) ([]int64, error) {
	var arms []string
	for rank, st := range boardStatuses {
		if len(statuses) > 0 && !slices.Contains(statuses, st) {
			continue
		}
		// t is a queued job's turn, 0 for the others (sorted by id).
		first := func(rank int, turn, where, order string) string {
			return fmt.Sprintf(`SELECT * FROM (SELECT id, %d AS r, %s AS t FROM jobs WHERE %s ORDER BY %s LIMIT %d) x`, rank, turn, where, order, limit)
		}
		switch st {
		case "running":
			arms = append(arms, fmt.Sprintf(`SELECT id, %d AS r, 0 AS t FROM jobs WHERE status = 'running'`, rank))
		case "queued":
			arms = append(arms, first(rank, "claim_turn", `status = 'queued'`, "claim_turn, id"))
		case "failed":
			arms = append(arms, first(rank, "0", `status = 'failed' AND pruned_at IS NULL`, "id"),
				first(rank+1, "0", `status = 'failed' AND pruned_at IS NOT NULL`, "id"))
		}
	}
	if len(arms) == 0 {
		return nil, nil
	}
	rows, err := tx.QueryContext(ctx, strings.Join(arms, " UNION ALL "))
	if err != nil {
		return nil, fmt.Errorf("board: %w", err)
	}
	defer rows.Close()
	type pick struct{ id, rank, turn int64 }
	var picks []pick
	for rows.Next() {
		var p pick
		if err := rows.Scan(&p.id, &p.rank, &p.turn); err != nil {
			return nil, fmt.Errorf("board: %w", err)
		}
		picks = append(picks, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("board: %w", err)
	}
	slices.SortFunc(picks, func(a, b pick) int {
		return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(a.turn, b.turn), cmp.Compare(a.id, b.id))
	})
	ids := make([]int64, 0, min(limit, len(picks)))
	for _, p := range picks[:min(limit, len(picks))] {
		ids = append(ids, p.id)
	}
	return ids, nil
}

// boardInOrder reads job_board in its order, every row or the first limit.
func (s *Store) boardInOrder(ctx context.Context, limit int, statuses []string) ([]BoardRow, error) {
	var where string
	args := make([]any, 0, len(statuses))
	if len(statuses) > 0 {
		marks := make([]string, len(statuses))
		for i, st := range statuses {
			marks[i] = fmt.Sprintf("$%d", i+1)
			args = append(args, st)
		}
		where = ` WHERE status IN (` + strings.Join(marks, ", ") + `)`
	}
	q := `SELECT id, status, lane, attempt, since, age_seconds, age, error, next_action, error_class, pruned_at FROM job_board` + where +
		` ORDER BY ` + boardOrder
	if limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", limit)
	}
	rows, err := s.rdb.QueryContext(ctx, s.dialect.rebind(q), args...)
	if err != nil {
		return nil, s.classify(fmt.Errorf("board: %w", err))
	}
	out, err := scanBoard(rows)
	return out, s.classify(err)
}

func scanBoard(rows *sql.Rows) ([]BoardRow, error) {
	defer rows.Close()
	out := []BoardRow{}
	for rows.Next() {
		var r BoardRow
		var lane, ageText, errText, class sql.NullString
		var since, pruned nullTime
		var age sql.NullInt64
		if err := rows.Scan(&r.ID, &r.Status, &lane, &r.Attempt, &since, &age, &ageText, &errText, &r.NextAction, &class, &pruned); err != nil {
			return nil, fmt.Errorf("board: %w", err)
		}
		r.Lane, r.Age, r.Error, r.ErrorClass = lane.String, ageText.String, errText.String, class.String
		r.Since, r.AgeSeconds, r.PrunedAt = since.Ptr(), nullInt(age), pruned.Ptr()
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("board: %w", err)
	}
	return out, nil
}

func nullInt(n sql.NullInt64) *int64 {
	if !n.Valid {
		return nil
	}
	v := n.Int64
	return &v
}

// BoardRowByID returns one job's job_board row, or nil when the job is
// done or does not exist.
func (s *Store) BoardRowByID(ctx context.Context, id int64) (*BoardRow, error) {
	const q = `SELECT id, status, lane, attempt, since, age_seconds, age, error, next_action, error_class, pruned_at FROM job_board WHERE id = $1`
	rows, err := s.rdb.QueryContext(ctx, s.dialect.rebind(q), id)
	if err != nil {
		return nil, s.classify(fmt.Errorf("board row of job %d: %w", id, err))
	}
	out, err := scanBoard(rows)
	if err != nil || len(out) == 0 {
		return nil, err
	}
	return &out[0], nil
}
