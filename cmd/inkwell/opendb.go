package main

import (
	"context"
	"errors"
	"os"
	"strings"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

// openExisting opens a database that must already hold Inkwell's schema,
// for commands that inspect or change rows but never create a database.
func openExisting(ctx context.Context, dsn string) (*store.Store, error) {
	shown := store.RedactDSN(dsn) // never print a PostgreSQL password
	if !strings.Contains(dsn, "://") {
		if _, err := os.Stat(strings.TrimPrefix(dsn, "file:")); err != nil {
			return nil, inkwell.Errorf(inkwell.EINVALID, "database %s: %v; start 'inkwell serve --db %s' to create it", shown, errors.Unwrap(err), shown)
		}
	}
	st, err := store.Open(ctx, dsn, store.Options{NoMigrate: true})
	if err != nil {
		return nil, err
	}
	v, err := st.SchemaVersion(ctx)
	if err != nil || v == 0 {
		st.Close()
		return nil, inkwell.Errorf(inkwell.EINVALID, "database %s holds no Inkwell schema; run 'inkwell migrate --db %s' or 'inkwell serve' first", shown, shown)
	}
	return st, nil
}
