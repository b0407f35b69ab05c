package main

import (
	"context"
	"fmt"
	"io"

	"github.com/inkwell/inkwell/internal/store"
)

func init() {
	register("migrate", "create or upgrade the schema (also adopts a legacy single-table database)", runMigrate)
}

const migrateHelp = `
Migrate applies every pending schema migration in one transaction: all
of them or none. A database migrated by a newer inkwell is refused. Pointed at a database of the old single-table Inkwell, it
adopts it in place: every row is kept with the key legacy-<id>. Run
'inkwell recover' (or 'inkwell serve') afterwards to close the legacy
jobs that were left running. 'inkwell serve' migrates by itself.`

func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("migrate", "[--db PATH]", migrateHelp, stdout, stderr)
	db := dbFlag(fs)
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	if !flagsOnly(fs, stderr, "the database is --db PATH") {
		return 2
	}
	st, err := store.Open(ctx, *db, store.Options{})
	if err != nil {
		return fail(stderr, "migrate", err)
	}
	defer st.Close()
	v, err := st.SchemaVersion(ctx)
	if err != nil {
		return fail(stderr, "migrate", err)
	}
	fmt.Fprintf(stdout, "%s: schema version %d\n", store.RedactDSN(*db), v)
	return 0
}
