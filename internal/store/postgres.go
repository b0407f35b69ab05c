package store

import (
	"context"

	"github.com/inkwell/inkwell"
)

// openPostgres is the PostgreSQL seam. The dialect is not built yet.
func (s *Store) openPostgres(ctx context.Context, dsn string) error {
	return inkwell.Errorf(inkwell.EINVALID, "PostgreSQL backend is not built yet; use a SQLite file path")
}

func isPostgresUniqueViolation(err error) bool { return false }

func (s *Store) lockLanePostgres(ctx context.Context, lane string) (*LaneLock, error) {
	return nil, inkwell.Errorf(inkwell.EINVALID, "PostgreSQL lane locks are not built yet")
}
