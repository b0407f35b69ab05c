package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/inkwell/inkwell"
)

// EndedAttempt is an attempt a lane still runs a call for whose row is no
// longer running: cancelled (by `inkwell cancel` or another process's
// API), or closed by recovery or rescue.
type EndedAttempt struct {
	ID     int64
	Status string
	Class  inkwell.ErrorClass
}

// endedAttemptsBatch bounds the ids of one read (SQLite's bound on
// variables is far above it).
const endedAttemptsBatch = 500

// AttemptsNotRunning returns those of ids whose attempt row is no longer
// running, with how it ended. A lane asks it about its calls in flight, so
// a cancel made in another process aborts the call (docs/design.md §9). Ids
// with no row are left out. It reads on the read pool and writes nothing.
func (s *Store) AttemptsNotRunning(ctx context.Context, ids []int64) ([]EndedAttempt, error) {
	var out []EndedAttempt
	for len(ids) > 0 {
		batch := ids[:min(len(ids), endedAttemptsBatch)]
		ids = ids[len(batch):]
		marks := make([]string, len(batch))
		args := make([]any, len(batch))
		for i, id := range batch {
			marks[i], args[i] = fmt.Sprintf("$%d", i+1), id
		}
		q := `SELECT id, status, error_class FROM job_attempts WHERE status <> 'running' AND id IN (` + strings.Join(marks, ", ") + `)`
		rows, err := s.rdb.QueryContext(ctx, s.dialect.rebind(q), args...)
		if err != nil {
			return nil, s.classify(fmt.Errorf("attempts not running: %w", err))
		}
		for rows.Next() {
			var a EndedAttempt
			var class sql.NullString
			if err := rows.Scan(&a.ID, &a.Status, &class); err != nil {
				rows.Close()
				return nil, s.classify(fmt.Errorf("attempts not running: %w", err))
			}
			a.Class = inkwell.ErrorClass(class.String)
			out = append(out, a)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, s.classify(fmt.Errorf("attempts not running: %w", err))
		}
	}
	return out, nil
}
