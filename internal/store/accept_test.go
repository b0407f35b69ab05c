package store_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// Group commit: the accepts that share one transaction share its fate.
// store.AcceptBatch commits a batch whose members the test chooses, as the
// batcher commits requests that arrived together.

func TestStore_AcceptGroupCommit(t *testing.T) {
	t.Parallel()
	t.Run("DuplicateKeyInOneBatch", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			p := acceptParams("dup", "one poem")
			other := acceptParams("dup", "another poem") // same key, other body
			res := acceptBatch(t, s, p, p, other, acceptParams("solo", "a poem of its own"))
			if res[0].Err != nil || !res[0].Created {
				t.Fatalf("first of the key: created %t, err %v; want created", res[0].Created, res[0].Err)
			}
			if res[1].Err != nil || res[1].Created || res[1].Job.ID != res[0].Job.ID {
				t.Errorf("second of the key: job %d, created %t, err %v; want job %d, not created",
					res[1].Job.ID, res[1].Created, res[1].Err, res[0].Job.ID)
			}
			if inkwell.ErrorCode(res[2].Err) != inkwell.EKEYREUSED {
				t.Errorf("same key, other body, in the same batch: err %v, want %s", res[2].Err, inkwell.EKEYREUSED)
			}
			if res[3].Err != nil || !res[3].Created {
				t.Errorf("other key: created %t, err %v; want created: a refused member does not fail the group", res[3].Created, res[3].Err)
			}
			if n := count(t, s, `SELECT COUNT(*) FROM jobs WHERE idempotency_key = 'dup'`); n != 1 {
				t.Errorf("rows under the key = %d, want 1", n)
			}
			if got := mustShow(t, s, res[0].Job.ID).Job; got.RequestHash != p.RequestHash {
				t.Errorf("stored hash %q, want the first body's %q", got.RequestHash, p.RequestHash)
			}
		})
	})
	t.Run("CanceledMemberIsNotStored", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T, s *store.Store) {
			gone, cancel := context.WithCancel(t.Context())
			cancel()
			ctxs := []context.Context{t.Context(), gone, t.Context()}
			ps := []store.AcceptParams{acceptParams("before", "stays"), acceptParams("gone", "client left"), acceptParams("after", "stays")}
			res := store.AcceptBatch(s, ctxs, ps)
			if !errors.Is(res[1].Err, context.Canceled) || res[1].Created {
				t.Errorf("canceled member: created %t, err %v; want context.Canceled", res[1].Created, res[1].Err)
			}
			for _, i := range []int{0, 2} {
				if res[i].Err != nil || !res[i].Created {
					t.Errorf("member %s: created %t, err %v; want created", ps[i].IdempotencyKey, res[i].Created, res[i].Err)
				}
			}
			if n := count(t, s, `SELECT COUNT(*) FROM jobs WHERE idempotency_key = 'gone'`); n != 0 {
				t.Errorf("rows for the canceled member = %d, want 0", n)
			}
			// Through Accept itself: a caller whose context has already
			// ended is refused, whether it is caught before the hand-over
			// or in the batch.
			for range 20 {
				if _, _, err := s.Accept(gone, acceptParams("late", "never stored")); !errors.Is(err, context.Canceled) {
					t.Fatalf("Accept with a canceled context: err %v, want context.Canceled", err)
				}
			}
			if n := count(t, s, `SELECT COUNT(*) FROM jobs WHERE idempotency_key = 'late'`); n != 0 {
				t.Errorf("rows for canceled Accepts = %d, want 0", n)
			}
		})
	})
	// A member whose insert fails (a trigger raises for it) and a commit
	// that fails (a deferred check fires at COMMIT) each fail every member,
	// store no row, and leave the store able to commit the next batch.
	for _, tc := range []struct {
		name       string
		poison     func(t *testing.T, s *store.Store)
		errMention string
	}{
		{"FailedInsertFailsTheGroup", poisonInsert, "poisoned"},
		{"FailedCommitFailsTheGroup", poisonCommit, "commit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			storetest.Run(t, func(t *testing.T, s *store.Store) {
				tc.poison(t, s)
				before := dumpAll(t, s)
				good := []store.AcceptParams{acceptParams("good-1", "fine"), acceptParams("good-2", "fine too")}
				res := acceptBatch(t, s, good[0], acceptParams("poison", "fails"), good[1])
				for i, r := range res {
					if r.Err == nil || r.Created || r.Job.ID != 0 {
						t.Errorf("member %d: job %d, created %t, err %v; want the group's error and no job", i, r.Job.ID, r.Created, r.Err)
					} else if !strings.Contains(r.Err.Error(), tc.errMention) {
						t.Errorf("member %d: err %q, want it to mention %q", i, r.Err, tc.errMention)
					}
				}
				assertSameDump(t, before, dumpAll(t, s))
				// The write connection is usable again: no transaction was
				// left open behind the failure.
				res = acceptBatch(t, s, good...)
				for i, r := range res {
					if r.Err != nil || !r.Created {
						t.Errorf("after the failure, %s: created %t, err %v; want created", good[i].IdempotencyKey, r.Created, r.Err)
					}
				}
			})
		})
	}
}

// An accept answers with the job as it is stored, payload included,
// though it does not read the payload back (it answers with the caller's
// own bytes): every member of a group, on each way a group is written (on
// PostgreSQL, one statement for the plain members and a transaction for
// one with a budget), and a re-send, which reads the stored row.
func TestStore_AcceptAnswersTheStoredJob(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		withBudget(t, s, ptr(int64(1_000_000)))
		chat := []byte(`{"account":"default","messages":[{"content":"` + strings.Repeat("ink ", 500) + `","role":"user"}],"model":"gpt-4o-mini"}`)
		ps := []store.AcceptParams{
			acceptParams("plain", "a poem"),
			{IdempotencyKey: "chat", RequestHash: inkwell.RequestHash(chat), Payload: chat},
			budgetParams("budgeted", 100),
		}
		for round, want := range []bool{true, false} { // then a re-send of each
			for i, r := range acceptBatch(t, s, ps...) {
				if r.Err != nil || r.Created != want {
					t.Fatalf("round %d, %s: created %t, err %v; want created %t", round, ps[i].IdempotencyKey, r.Created, r.Err, want)
				}
				stored := mustShow(t, s, r.Job.ID).Job
				if !reflect.DeepEqual(r.Job, stored) {
					t.Errorf("round %d, %s: accept answered\n%+v\nthe row is\n%+v", round, ps[i].IdempotencyKey, r.Job, stored)
				}
				if string(stored.Payload) != string(ps[i].Payload) {
					t.Errorf("round %d, %s: stored payload %.60s…, want the caller's %.60s…", round, ps[i].IdempotencyKey, stored.Payload, ps[i].Payload)
				}
			}
		}
	})
}

func acceptBatch(t *testing.T, s *store.Store, ps ...store.AcceptParams) []store.AcceptResult {
	t.Helper()
	ctxs := make([]context.Context, len(ps))
	for i := range ctxs {
		ctxs[i] = t.Context()
	}
	return store.AcceptBatch(s, ctxs, ps)
}

// poisonInsert makes the insert of key "poison" fail, at the statement.
func poisonInsert(t *testing.T, s *store.Store) {
	t.Helper()
	ddl := []string{`CREATE TRIGGER test_poison BEFORE INSERT ON jobs WHEN NEW.idempotency_key = 'poison'
		BEGIN SELECT RAISE(ABORT, 'poisoned by the test'); END`}
	if s.Dialect() == "postgres" {
		ddl = []string{
			`CREATE FUNCTION test_poison() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN
				IF NEW.idempotency_key = 'poison' THEN RAISE EXCEPTION 'poisoned by the test'; END IF;
				RETURN NEW;
			END $$`,
			`CREATE TRIGGER test_poison BEFORE INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION test_poison()`,
		}
	}
	execDDL(t, s, ddl)
}

// poisonCommit makes a transaction that inserted key "poison" fail at
// COMMIT: SQLite checks a deferred foreign key then, PostgreSQL runs a
// deferred constraint trigger then.
func poisonCommit(t *testing.T, s *store.Store) {
	t.Helper()
	ddl := []string{
		`CREATE TABLE test_parent (id INTEGER PRIMARY KEY)`,
		`CREATE TABLE test_child (parent INTEGER REFERENCES test_parent (id) DEFERRABLE INITIALLY DEFERRED)`,
		`CREATE TRIGGER test_poison AFTER INSERT ON jobs WHEN NEW.idempotency_key = 'poison'
		BEGIN INSERT INTO test_child VALUES (42); END`,
	}
	if s.Dialect() == "postgres" {
		ddl = []string{
			`CREATE FUNCTION test_poison() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN
				IF NEW.idempotency_key = 'poison' THEN RAISE EXCEPTION 'poisoned by the test at commit'; END IF;
				RETURN NULL;
			END $$`,
			`CREATE CONSTRAINT TRIGGER test_poison AFTER INSERT ON jobs DEFERRABLE INITIALLY DEFERRED
			FOR EACH ROW EXECUTE FUNCTION test_poison()`,
		}
	}
	execDDL(t, s, ddl)
}

func execDDL(t *testing.T, s *store.Store, ddl []string) {
	t.Helper()
	for _, q := range ddl {
		if _, err := s.WriteDB().ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// TestStore_AcceptGroupMixed: one group whose members take every path an
// accept can take (on PostgreSQL the plain ones are one statement, the
// rest one by one) answers each as a lone Accept would: new jobs of one
// account take its next turns in order, a re-send of a stored key and a budget
// reservation in the same group are answered in place, a refusal writes
// nothing, and the queue's limit admits no more than it allows.
func TestStore_AcceptGroupMixed(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		withBudget(t, s, ptr[int64](10_000))
		stored := mustAccept(t, s, acceptParams("stored", "a poem stored before"))
		refused := acceptParams("refused", "never stored")
		refused.Refuse = inkwell.Errorf(inkwell.ETOOMANY, "refused by the test")
		res := acceptBatch(t, s,
			acceptParams("new-1", "first new"), acceptParams("stored", "a poem stored before"), budgetParams("budgeted", 4_000),
			refused, acceptParams("new-2", "second new"))
		for i, want := range []struct {
			created bool
			code    string
		}{{created: true}, {}, {created: true}, {code: inkwell.ETOOMANY}, {created: true}} {
			if res[i].Created != want.created || inkwell.ErrorCode(res[i].Err) != want.code || (want.code == "" && res[i].Err != nil) {
				t.Errorf("member %d: created %t, err %v; want created %t, code %q", i, res[i].Created, res[i].Err, want.created, want.code)
			}
		}
		if res[1].Job.ID != stored.ID {
			t.Errorf("re-send answered job %d, want the stored job %d", res[1].Job.ID, stored.ID)
		}
		wantReservation(t, s, res[2].Job.ID, store.ReservationOpen, 4_000)
		if a := account(t, s); a.ReservedMicros != 4_000 {
			t.Errorf("acme reserved %d, want 4000", a.ReservedMicros)
		}
		if n := count(t, s, `SELECT COUNT(*) FROM jobs WHERE idempotency_key = 'refused'`); n != 0 {
			t.Errorf("the refused member stored %d rows", n)
		}
		var t1, t2, ts int64
		for _, c := range []struct {
			id   int64
			turn *int64
		}{{res[0].Job.ID, &t1}, {res[4].Job.ID, &t2}, {stored.ID, &ts}} {
			if err := s.DB().QueryRowContext(t.Context(), rebind(s, `SELECT claim_turn FROM jobs WHERE id = $1`), c.id).Scan(c.turn); err != nil {
				t.Fatal(err)
			}
		}
		// new-2 follows the re-send, whose turn a group written as one
		// statement counts and leaves unused (acceptSetSQL): one turn at most.
		if t1 != ts+1 || (t2 != ts+2 && t2 != ts+3) {
			t.Errorf("turns of the default account: stored %d, new-1 %d, new-2 %d; want the next ones in order, at most one left unused", ts, t1, t2)
		}
		if res[0].Job.ID > res[4].Job.ID {
			t.Errorf("new-1 got id %d after new-2's %d: the group's order is lost", res[0].Job.ID, res[4].Job.ID)
		}

		// Admission: 4 jobs are queued; with room for one more, a group of
		// two new keys stores the first and refuses the second.
		limited := []store.AcceptParams{acceptParams("room", "fits"), acceptParams("no-room", "does not fit")}
		for i := range limited {
			limited[i].MaxQueued = 5
		}
		res = acceptBatch(t, s, limited...)
		if !res[0].Created || res[0].Err != nil || inkwell.ErrorCode(res[1].Err) != inkwell.ETOOMANY {
			t.Errorf("near the limit: %+v / %+v; want the first created, the second %s", res[0], res[1], inkwell.ETOOMANY)
		}
		if n := count(t, s, `SELECT COUNT(*) FROM jobs WHERE status = 'queued'`); n != 5 {
			t.Errorf("%d jobs queued, want 5 (the limit)", n)
		}
	})
}
