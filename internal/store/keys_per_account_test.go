package store_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestStore_KeysPerAccount: idempotency keys are unique per account
// (migration 0008). The same key under two accounts is two jobs, each with
// its own provider key (a provider that honours keys never answers one
// account with the other's text); a re-send within an account is the same
// job; the same key with another body within an account is refused and
// writes nothing.
func TestStore_KeysPerAccount(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		params := func(account, prompt string) store.AcceptParams {
			payload := fmt.Sprintf(`{"prompt":%q,"account":%q}`, prompt, account)
			return store.AcceptParams{Account: account, IdempotencyKey: "shared-key", RequestHash: inkwell.RequestHash([]byte(payload)), Payload: []byte(payload)}
		}
		a, createdA, errA := s.Accept(t.Context(), params("acme", "same words"))
		b, createdB, errB := s.Accept(t.Context(), params("globex", "same words"))
		if errA != nil || errB != nil || !createdA || !createdB {
			t.Fatalf("accept under two accounts: (%v, %v), (%v, %v); want two new jobs", createdA, errA, createdB, errB)
		}
		if a.ID == b.ID || a.Account != "acme" || b.Account != "globex" {
			t.Fatalf("jobs %d (%s) and %d (%s); want two jobs, one per account", a.ID, a.Account, b.ID, b.Account)
		}
		if ka, kb := storetest.ProviderKey(t, s, a.ID, a.IdempotencyKey), storetest.ProviderKey(t, s, b.ID, b.IdempotencyKey); ka == kb {
			t.Errorf("both accounts' jobs go to the provider under key %q; want one key each", ka)
		}

		again, created, err := s.Accept(t.Context(), params("acme", "same words"))
		if err != nil || created || again.ID != a.ID {
			t.Errorf("re-send under acme = job %d (created %v, %v); want job %d, not created", again.ID, created, err, a.ID)
		}

		before := dumpAll(t, s)
		_, _, err = s.Accept(t.Context(), params("acme", "other words"))
		if inkwell.ErrorCode(err) != inkwell.EKEYREUSED {
			t.Errorf("same key, other body, same account: %v; want %s", err, inkwell.EKEYREUSED)
		}
		assertSameDump(t, before, dumpAll(t, s))

		// The default account: an empty Account is "default", one key space.
		d := mustAccept(t, s, store.AcceptParams{IdempotencyKey: "shared-key", RequestHash: "h", Payload: []byte(`{"prompt":"p"}`)})
		if d.Account != inkwell.DefaultAccount || d.ID == a.ID || d.ID == b.ID {
			t.Errorf("default account job = %d (%q); want a third job of %q", d.ID, d.Account, inkwell.DefaultAccount)
		}
	})
}

// TestMigrate_KeysPerAccountKeepsRows: a database at schema version 7,
// with jobs of several accounts (one payload names none, one is not JSON),
// their attempts, results and charges, is migrated by 0008: every row, id
// and key is kept, each job gets the account its payload names, the
// counts and views still read, the same key is free again under another
// account, and (SQLite, where jobs is built again) every index and trigger
// of jobs is back as it was, foreign keys hold, and prune still works.
func TestMigrate_KeysPerAccountKeepsRows(t *testing.T) {
	t.Parallel()
	storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
		dsn, old := openAtVersion(t, b, 7)
		db := old.DB()
		const at = `'2026-11-30T00:00:00.000000Z'`
		jobs := []struct {
			id      int64
			payload string
			status  string
			account string // what 0008 should find
		}{
			{3, `{"prompt":"a","account":"acme","max_words":50}`, "done", "acme"},
			{5, `{"prompt":"b"}`, "done", "default"},
			{8, `not json at all`, "failed", "default"},
			{9, `{"prompt":"c","account":""}`, "queued", "default"},
			{12, `{"prompt":"d","account":"globex"}`, "failed", "globex"},
		}
		for _, j := range jobs {
			finished := at
			if j.status == "queued" {
				finished = "NULL"
			}
			mustExecAll(t, db, fmt.Sprintf(`INSERT INTO jobs (id, idempotency_key, request_hash, payload, status, error, error_class, lane, created_at, started_at, finished_at)
				VALUES (%d, 'key-%d', 'h', %s, '%s', %s, %s, 'local', %s, %s, %s)`, j.id, j.id, quote(j.payload), j.status,
				map[bool]string{true: "'boom'", false: "NULL"}[j.status == "failed"], map[bool]string{true: "'provider_error'", false: "NULL"}[j.status == "failed"],
				at, at, finished))
			if j.status == "queued" {
				continue
			}
			st := map[string]string{"done": "done", "failed": "failed"}[j.status]
			mustExecAll(t, db, fmt.Sprintf(`INSERT INTO job_attempts (job_id, attempt_number, status, error, error_class, lane, started_at, finished_at)
				VALUES (%d, 1, '%s', %s, %s, 'local', %s, %s)`, j.id, st,
				map[bool]string{true: "'boom'", false: "NULL"}[j.status == "failed"], map[bool]string{true: "'provider_error'", false: "NULL"}[j.status == "failed"], at, at))
			if j.status == "done" {
				mustExecAll(t, db,
					fmt.Sprintf(`INSERT INTO results (job_id, attempt_id, text, created_at) SELECT %d, id, 'text', %s FROM job_attempts WHERE job_id = %d`, j.id, at, j.id),
					fmt.Sprintf(`INSERT INTO charges (job_id, attempt_id, account, amount_micros, provider_request_id, created_at) SELECT %d, id, '%s', 10, 'req-%d', %s FROM job_attempts WHERE job_id = %d`, j.id, j.account, j.id, at, j.id))
			}
		}
		if b.Name == "postgres" { // the ids above were given, not drawn
			mustExecAll(t, db, `SELECT setval(pg_get_serial_sequence('jobs', 'id'), 100)`)
		}
		before := dumpOf(t, db, "job_attempts", "results", "charges")
		objectsBefore := jobsSchemaObjects(t, old)
		if err := old.Close(); err != nil {
			t.Fatal(err)
		}

		st := storetest.MustOpen(t, dsn, store.Options{}) // applies 0008
		for _, j := range jobs {
			got, err := st.Job(t.Context(), j.id)
			if err != nil {
				t.Fatalf("job %d after 0008: %v", j.id, err)
			}
			if got.IdempotencyKey != fmt.Sprintf("key-%d", j.id) || string(got.Payload) != j.payload || got.Status != j.status || got.Account != j.account {
				t.Errorf("job %d after 0008 = key %q, payload %s, %s, account %q; want key-%d, the same payload and status, account %q",
					j.id, got.IdempotencyKey, got.Payload, got.Status, got.Account, j.id, j.account)
			}
		}
		if n := countRows(t, st, "jobs"); n != len(jobs) {
			t.Errorf("jobs after 0008 = %d rows, want %d", n, len(jobs))
		}
		assertSameDump(t, before, dumpOf(t, st.DB(), "job_attempts", "results", "charges"))
		wantCountsKept(t, st, "after migration 0008")
		if _, err := st.Overview(t.Context()); err != nil {
			t.Errorf("job_overview after 0008: %v", err)
		}
		if b.Name == "sqlite" {
			// Every index and trigger is back word for word; later
			// migrations (0009 on) add their own beside them, and drop
			// only jobs_queued (0014: claims and views read the queue in
			// turn order, on jobs_queued_turn).
			got := jobsSchemaObjects(t, st)
			for _, o := range objectsBefore {
				if !slices.Contains(got, o) && !strings.HasPrefix(o, "index jobs_queued: ") {
					t.Errorf("after 0008 and the migrations since, jobs lacks (or changed) %q; it has:\n%q", o, got)
				}
			}
			if n := count(t, st, `SELECT COUNT(*) FROM pragma_foreign_key_check`); n != 0 {
				t.Errorf("foreign_key_check after 0008: %d violations", n)
			}
		}

		// Key 3 belongs to acme: globex may use it, acme's re-send finds job 3.
		p := store.AcceptParams{Account: "acme", IdempotencyKey: "key-3", RequestHash: "h", Payload: []byte(jobs[0].payload)}
		if j, created, err := st.Accept(t.Context(), p); err != nil || created || j.ID != 3 {
			t.Errorf("acme re-sends key-3: job %d, created %v, %v; want job 3", j.ID, created, err)
		}
		p.Account = "globex"
		if j, created, err := st.Accept(t.Context(), p); err != nil || !created || j.ID == 3 || j.Account != "globex" {
			t.Errorf("globex sends key-3: job %d (%s), created %v, %v; want a new job of globex", j.ID, j.Account, created, err)
		}

		// Prune rewrites job rows on SQLite: it keeps the account.
		if _, err := st.PruneOlderThan(t.Context(), 0, store.PruneOptions{Pause: -1, By: "cli"}); err != nil {
			t.Fatalf("prune after 0008: %v", err)
		}
		if got, err := st.Job(t.Context(), 3); err != nil || got.PrunedAt == nil || got.Account != "acme" || got.IdempotencyKey != "key-3" {
			t.Errorf("job 3 after prune = %+v, %v; want pruned, account acme, key kept", got, err)
		}
		wantCountsKept(t, st, "after prune")
	})
}

// jobsSchemaObjects is the text of every index and trigger on jobs that has
// one (SQLite), in name order.
func jobsSchemaObjects(t *testing.T, s *store.Store) []string {
	t.Helper()
	rows, err := s.DB().QueryContext(t.Context(), `SELECT type || ' ' || name || ': ' || sql FROM sqlite_master
		WHERE tbl_name = 'jobs' AND type IN ('index', 'trigger') AND sql IS NOT NULL ORDER BY name`)
	if err != nil {
		if s.Dialect() == "postgres" {
			return nil
		}
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}
