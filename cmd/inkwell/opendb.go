package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/crashpoint"
	"github.com/inkwell/inkwell/internal/store"
)

// openForJobs starts a command on named jobs (cancel, retry): it parses the
// flags and job IDs, then opens the database with openArmed. A nil store
// means the command exits with the code returned.
func openForJobs(ctx context.Context, cmd, help string, args []string, stdout, stderr io.Writer) (*store.Store, []int64, int) {
	fs := newFlags(cmd, "ID... [--db PATH]", help, stdout, stderr)
	db := dbFlag(fs)
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return nil, nil, code
	}
	ids, ok := jobIDs(fs, cmd, stderr)
	if !ok {
		return nil, nil, 2
	}
	st, code := openArmed(ctx, cmd, *db, stderr)
	return st, ids, code
}

// openArmed arms the crash points INKWELL_CRASH_AT names, then opens the
// existing database at dsn. A nil store means the command exits with the
// code returned (1, said on stderr).
func openArmed(ctx context.Context, cmd, dsn string, stderr io.Writer) (*store.Store, int) {
	if err := crashpoint.ArmFromEnv(); err != nil {
		return nil, fail(stderr, cmd, err)
	}
	st, err := openExisting(ctx, dsn)
	if err != nil {
		return nil, fail(stderr, cmd, err)
	}
	return st, 0
}

// openExisting opens a database that must already hold Inkwell's schema,
// for commands that inspect or change rows but never create a database.
// openExistingMigrated opens a database that exists (a SQLite file that
// is not there is refused, and not created) and migrates it.
func openExistingMigrated(ctx context.Context, dsn string) (*store.Store, error) {
	if err := mustExist(dsn); err != nil {
		return nil, err
	}
	return store.Open(ctx, dsn, store.Options{})
}

// mustExist refuses a SQLite path with no file (a PostgreSQL URL passes).
func mustExist(dsn string) error {
	if strings.Contains(dsn, "://") {
		return nil
	}
	if _, err := os.Stat(strings.TrimPrefix(dsn, "file:")); err != nil {
		shown := store.RedactDSN(dsn)
		return inkwell.Errorf(inkwell.EINVALID, "database %s: %v; start 'inkwell serve --db %s' to create it", shown, errors.Unwrap(err), shown)
	}
	return nil
}

// readSchema is the oldest schema the read commands (status, show, audit)
// can read: the newest view and column they read came with it. A file one
// migration behind this one (0019 adds a column only the worker writes)
// still reads, so an operator can look at a database a running serve of
// the last release holds, which refuses a migration under it.
const readSchema = 18

// openForReading is openExisting for a read command: an older schema is
// refused, saying to migrate, instead of failing on a missing column.
func openForReading(ctx context.Context, dsn string) (*store.Store, error) {
	st, err := openExisting(ctx, dsn)
	if store.IsReadOnly(err) {
		// A file this user may read but not write (another user's serve,
		// a read-only mount): read it as it is, writing nothing.
		st, err = openExistingWith(ctx, dsn, store.Options{NoMigrate: true, ReadOnly: true})
	}
	if err != nil {
		return nil, err
	}
	if v, err := st.SchemaVersion(ctx); err == nil && v < readSchema {
		st.Close()
		shown := store.RedactDSN(dsn)
		return nil, inkwell.Errorf(inkwell.EINVALID, "database %s is at schema version %d, older than this inkwell reads (%d): run 'inkwell migrate --db %s' (it is refused while a lane runs: stop the older serve first)", shown, v, readSchema, shown)
	}
	return st, nil
}

// readAsOpened is err, or, when the store read a file without locks
// (openForReading's read-only fallback) and the file changed meanwhile,
// the refusal to show what may be torn (store.CheckReadAsOpened). Call it
// after every read of a command and before it prints.
func readAsOpened(st *store.Store, err error) error {
	if changed := st.CheckReadAsOpened(); changed != nil {
		return changed
	}
	return err
}

func openExisting(ctx context.Context, dsn string) (*store.Store, error) {
	return openExistingWith(ctx, dsn, store.Options{NoMigrate: true})
}

func openExistingWith(ctx context.Context, dsn string, opts store.Options) (*store.Store, error) {
	shown := store.RedactDSN(dsn) // never print a PostgreSQL password
	if err := mustExist(dsn); err != nil {
		return nil, err
	}
	st, err := store.Open(ctx, dsn, opts)
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

// openCreating opens the database, creating and migrating it when it does
// not exist yet (tokens create and accounts add work before the first
// serve), and says so on stderr when it did: a mistyped --db would
// otherwise leave a token or a budget on a new file the server never reads.
func openCreating(ctx context.Context, dsn string, stderr io.Writer) (*store.Store, error) {
	created := mustExist(dsn) != nil
	st, err := store.Open(ctx, dsn, store.Options{})
	if err == nil && created {
		fmt.Fprintf(stderr, "inkwell: created a new database %s (it did not exist); if you meant the one serve uses, check --db\n", store.RedactDSN(dsn))
	}
	return st, err
}
