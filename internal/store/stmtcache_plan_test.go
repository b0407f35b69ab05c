package store_test

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// A statement the store keeps prepared is planned once: binding new values
// to it never makes SQLite parse and plan it again (stmtcache.go,
// planOnce). SQLite re-plans a statement at its next step when a parameter
// whose value its planner read is bound anew (a LIMIT, a comparison with
// an indexed column that has STAT4 samples, a partial index's WHERE), and
// the fair claim's statement was re-planned on nearly every claim. The
// check runs every statement of the cache, after a workload of every
// transition, on its own connection through SQLite's C API (the only way to
// read a statement's re-prepare counter), binding text to each parameter
// twice, before and after ANALYZE (which stores the STAT4 samples PRAGMA
// optimize stores at open). Each run is rolled back; an error a bogus
// value causes is no matter, as a re-plan happens before the first row.
func TestStore_KeptStatementsArePlannedOnce(t *testing.T) {
	t.Parallel()
	path := storetest.SQLitePath(t)
	s := storetest.MustOpen(t, path, store.Options{})
	runCycles(t, s, 0, 40)
	var kept []string
	for q := range store.PreparedStmts(s) {
		kept = append(kept, q)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if len(cachedIn(kept, claimSQL)) != 1 {
		t.Fatalf("the workload left no claim statement in the cache; the test would prove nothing")
	}
	db := openRaw(t, path)
	for _, analyzed := range []bool{false, true} {
		if analyzed {
			db.exec(t, "ANALYZE")
			if n := db.count(t, "SELECT COUNT(*) FROM sqlite_stat4"); n == 0 {
				t.Fatalf("ANALYZE stored no STAT4 samples; the test would prove nothing")
			}
		}
		for _, q := range kept {
			if n := db.replans(t, q); n != 0 {
				t.Errorf("analyzed %t: a kept statement was planned again %d times in 2 runs with new values:\n%s", analyzed, n, q)
			}
		}
	}
	// The same check catches the statement as it was run before (plain
	// parameters): the claim's LIMIT makes SQLite re-plan it, before
	// ANALYZE too.
	plain := strings.ReplaceAll(cachedIn(kept, claimSQL)[0], "+?", "?")
	if n := db.replans(t, plain); n == 0 {
		t.Errorf("the claim with plain parameters was not planned again; the check cannot tell")
	}
}

func cachedIn(kept []string, sub string) []string {
	var out []string
	for _, q := range kept {
		if strings.Contains(q, sub) {
			out = append(out, q)
		}
	}
	return out
}

// rawDB is one connection through SQLite's C API (modernc.org/sqlite/lib).
type rawDB struct {
	tls *libc.TLS
	db  uintptr
}

func openRaw(t *testing.T, path string) *rawDB {
	t.Helper()
	tls := libc.NewTLS()
	name, err := libc.CString(path)
	if err != nil {
		t.Fatal(err)
	}
	defer libc.Xfree(tls, name)
	db := outPointer(tls)
	defer libc.Xfree(tls, db)
	if rc := sqlite3.Xsqlite3_open_v2(tls, name, db, sqlite3.SQLITE_OPEN_READWRITE, 0); rc != sqlite3.SQLITE_OK {
		t.Fatalf("open %s: rc %d", path, rc)
	}
	r := &rawDB{tls: tls, db: readPointer(db)}
	t.Cleanup(func() { sqlite3.Xsqlite3_close_v2(tls, r.db); tls.Close() })
	return r
}

func (r *rawDB) errmsg() string { return libc.GoString(sqlite3.Xsqlite3_errmsg(r.tls, r.db)) }

func (r *rawDB) prepare(t *testing.T, q string) uintptr {
	t.Helper()
	text, err := libc.CString(q)
	if err != nil {
		t.Fatal(err)
	}
	defer libc.Xfree(r.tls, text)
	st := outPointer(r.tls)
	defer libc.Xfree(r.tls, st)
	if rc := sqlite3.Xsqlite3_prepare_v2(r.tls, r.db, text, -1, st, 0); rc != sqlite3.SQLITE_OK {
		t.Fatalf("prepare: %s\n%s", r.errmsg(), q)
	}
	return readPointer(st)
}

// outPointer allocates, in SQLite's own memory, the place a C call writes
// a pointer to: the address of a Go variable, written through by the
// transpiled C, fails the race detector's pointer checks (checkptr).
func outPointer(tls *libc.TLS) uintptr {
	return libc.Xcalloc(tls, 1, libc.Tsize_t(unsafe.Sizeof(uintptr(0))))
}

// readPointer reads the pointer a C call wrote at p (outPointer).
func readPointer(p uintptr) uintptr {
	b := libc.GoBytes(p, int(unsafe.Sizeof(uintptr(0))))
	if len(b) == 4 {
		return uintptr(binary.NativeEndian.Uint32(b))
	}
	return uintptr(binary.NativeEndian.Uint64(b))
}

func (r *rawDB) exec(t *testing.T, q string) {
	t.Helper()
	st := r.prepare(t, q)
	defer sqlite3.Xsqlite3_finalize(r.tls, st)
	for {
		switch rc := sqlite3.Xsqlite3_step(r.tls, st); rc {
		case sqlite3.SQLITE_ROW:
		case sqlite3.SQLITE_DONE:
			return
		default:
			t.Fatalf("%s: %s", q, r.errmsg())
		}
	}
}

func (r *rawDB) count(t *testing.T, q string) int64 {
	t.Helper()
	st := r.prepare(t, q)
	defer sqlite3.Xsqlite3_finalize(r.tls, st)
	if rc := sqlite3.Xsqlite3_step(r.tls, st); rc != sqlite3.SQLITE_ROW {
		t.Fatalf("%s: %s", q, r.errmsg())
	}
	return sqlite3.Xsqlite3_column_int64(r.tls, st, 0)
}

// replans prepares q, runs it twice in a transaction it rolls back, with
// a new text bound to every parameter each time (unbound after the run, as
// the driver does), and returns how often SQLite planned it again.
func (r *rawDB) replans(t *testing.T, q string) int32 {
	t.Helper()
	st := r.prepare(t, q)
	defer sqlite3.Xsqlite3_finalize(r.tls, st)
	r.exec(t, "BEGIN IMMEDIATE")
	defer r.exec(t, "ROLLBACK")
	n := sqlite3.Xsqlite3_bind_parameter_count(r.tls, st)
	for run := range 2 {
		var texts []uintptr
		for i := int32(1); i <= n; i++ {
			v, err := libc.CString(fmt.Sprintf("v%d-%d", run, i))
			if err != nil {
				t.Fatal(err)
			}
			texts = append(texts, v)
			sqlite3.Xsqlite3_bind_text(r.tls, st, i, v, -1, 0)
		}
		for sqlite3.Xsqlite3_step(r.tls, st) == sqlite3.SQLITE_ROW {
		}
		sqlite3.Xsqlite3_reset(r.tls, st)
		for i := int32(1); i <= n; i++ {
			sqlite3.Xsqlite3_bind_null(r.tls, st, i)
		}
		for _, v := range texts {
			libc.Xfree(r.tls, v)
		}
	}
	return sqlite3.Xsqlite3_stmt_status(r.tls, st, sqlite3.SQLITE_STMTSTATUS_REPREPARE, 0)
}
