package store

import (
	"context"
	"fmt"

	"github.com/inkwell/inkwell"
)

// Installation reads the database's identity (table installation, written
// once by migration 0005), whose id goes into every provider idempotency
// key. A database not migrated that far is EINVALID: run inkwell migrate.
func (s *Store) Installation(ctx context.Context) (inkwell.Installation, error) {
	var in inkwell.Installation
	err := s.rdb.QueryRowContext(ctx, `SELECT id, keys_from_job FROM installation WHERE one = 1`).Scan(&in.ID, &in.KeysFromJob)
	if err != nil {
		return in, s.classify(fmt.Errorf("read the installation id (a database not migrated yet has none: run inkwell migrate): %w", err))
	}
	return in, nil
}
