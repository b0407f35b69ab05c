package drill

import (
	"context"
	"database/sql"
	"fmt"
	"github.com/inkwell/inkwell/internal/store/storetest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/provider"
	"github.com/inkwell/inkwell/internal/provider/providersim"
	"github.com/inkwell/inkwell/internal/provider/providersim/simtest"
	"github.com/inkwell/inkwell/internal/store"
)

// world is a small Inkwell world built through the real parts: a SQLite
// file written by the store, whose jobs were completed with real calls to
// a real provider simulator on loopback. Tests break it with raw SQL, as
// a bug would, and expect the checker to say so.
type world struct {
	t    *testing.T
	dsn  string
	sim  *simtest.Sim
	prov *provider.OpenAI
	keys []string
	sent []Sent
	// reserve is what each accept reserves on account acct (a budget only
	// when acct has a row: check_budget_test.go).
	reserve int64
}

// mustWorld builds a world with one done job (key "k1", job 1).
func mustWorld(t *testing.T) *world {
	t.Helper()
	w := emptyWorld(t)
	w.mustRun("k1", true)
	return w
}

// emptyWorld builds a world without any job yet.
func emptyWorld(t *testing.T) *world {
	t.Helper()
	sim := simtest.MustStart(t, providersim.Config{})
	prov, err := provider.NewOpenAI(provider.OpenAIConfig{URL: sim.URL, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return &world{t: t, dsn: filepath.Join(t.TempDir(), "inkwell.db"), sim: sim, prov: prov}
}

func (w *world) open() *store.Store {
	w.t.Helper()
	st, err := store.Open(context.Background(), w.dsn, store.Options{})
	if err != nil {
		w.t.Fatal(err)
	}
	return st
}

// mustRun accepts a job under key and claims it; with complete, it calls
// the provider with the job's key and completes it, as the worker does.
func (w *world) mustRun(key string, complete bool) int64 {
	w.t.Helper()
	id := w.mustAccept(key)
	st := w.open()
	defer st.Close()
	c, err := claimAs(st, "drill")
	if err != nil || c == nil {
		w.t.Fatalf("claim: %v %v", c, err)
	}
	if complete {
		w.mustCall(st, c, true)
	}
	return id
}

// mustAccept accepts a job under key, as the API does for a client's
// request, and leaves it queued.
func (w *world) mustAccept(key string) int64 {
	w.t.Helper()
	st := w.open()
	defer st.Close()
	payload := fmt.Appendf(nil, `{"prompt":%q,"account":"acct","max_words":6}`, "a note for "+key)
	job, _, err := st.Accept(context.Background(), store.AcceptParams{IdempotencyKey: key, RequestHash: inkwell.RequestHash(payload), Payload: payload,
		Account: "acct", ReserveMicros: w.reserve})
	if err != nil {
		w.t.Fatal(err)
	}
	w.keys = append(w.keys, key)
	w.sent = append(w.sent, Sent{Seq: len(w.sent) + 1, Path: pathJobs, Key: key, JobID: job.ID, Outcome: OutcomeOK, Status: 201})
	return job.ID
}

// mustCall calls the provider for claim c with its job's key, as the
// worker does, and with complete stores the answer.
func (w *world) mustCall(st *store.Store, c *store.Claimed, complete bool) {
	w.t.Helper()
	ctx := context.Background()
	req := inkwell.Request{Prompt: "a note for " + c.Job.IdempotencyKey, Account: "acct", MaxWords: 6}
	resp, err := w.prov.Generate(ctx, inkwell.ProviderRequest{IdempotencyKey: storetest.ProviderKey(w.t, st, c.Job.ID, c.Job.IdempotencyKey), Prompt: req.Prompt, MaxWords: req.MaxWords})
	if err != nil {
		w.t.Fatal(err)
	}
	if !complete {
		return
	}
	err = st.CompleteIfRunning(ctx, store.CompleteParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID, Text: resp.Text,
		Account: req.Account, AmountMicros: resp.AmountMicros, ProviderRequestID: resp.RequestID})
	if err != nil {
		w.t.Fatal(err)
	}
}

// mustExec breaks the database with raw SQL, as no Inkwell code may.
func (w *world) mustExec(stmts ...string) {
	w.t.Helper()
	db, err := sql.Open("sqlite", "file:"+w.dsn+"?_pragma=foreign_keys(0)&_pragma=busy_timeout(5000)")
	if err != nil {
		w.t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			w.t.Fatalf("%s: %v", s, err)
		}
	}
}

func (w *world) mustSnap(kind Kind, label string) Snapshot {
	w.t.Helper()
	ctx := context.Background()
	s, err := Inspect(ctx, w.dsn)
	if err != nil {
		w.t.Fatal(err)
	}
	l, err := providersim.ReadLedger(ctx, w.sim.LedgerPath)
	if err != nil {
		w.t.Fatal(err)
	}
	s.Kind, s.Label, s.Ledger = kind, label, l.Entries
	return s
}

func (w *world) evidence(snaps ...Snapshot) Evidence {
	return Evidence{Snapshots: snaps, Keys: w.keys, Requests: w.sent}
}

// wantViolation fails unless vs holds a violation of inv on job, whose
// message names both.
func wantViolation(t *testing.T, vs []Violation, job int64, inv string) {
	t.Helper()
	for _, v := range vs {
		if v.JobID == job && v.Invariant == inv {
			msg := v.String()
			if (job != 0 && !strings.Contains(msg, fmt.Sprintf("job %d:", job))) || !strings.Contains(msg, inv) {
				t.Errorf("message %q does not name job %d and invariant %q", msg, job, inv)
			}
			return
		}
	}
	t.Errorf("no violation of %q on job %d; got %d:\n%s", inv, job, len(vs), joinViolations(vs))
}

func joinViolations(vs []Violation) string {
	var b strings.Builder
	for _, v := range vs {
		b.WriteString("  " + v.String() + "\n")
	}
	return b.String()
}

func TestCheck_HealthyWorldPasses(t *testing.T) {
	t.Parallel()
	w := mustWorld(t)
	w.mustRun("k2", true)
	s := w.mustSnap(KindFinal, "final")
	if len(s.Jobs) != 2 || len(s.Charges) != 2 || len(s.Ledger) != 2 {
		t.Fatalf("world has %d jobs, %d charges, %d bills; want 2 of each", len(s.Jobs), len(s.Charges), len(s.Ledger))
	}
	if vs := Check(w.evidence(s)); len(vs) != 0 {
		t.Errorf("healthy world: %d violations:\n%s", len(vs), joinViolations(vs))
	}
}

// TestCheck_BrokenWorlds: each way of breaking the database (or the
// ledger) that the drill exists to catch is caught, naming job and invariant.
func TestCheck_BrokenWorlds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		corrupt func(w *world)
		job     int64
		inv     string
	}{
		{"DuplicatedCharge", func(w *world) {
			// charges.job_id is UNIQUE in the table itself: rebuild the table
			// without it, then pay for job 1 a second time.
			w.mustExec(`CREATE TABLE charges_copy AS SELECT * FROM charges`,
				`DROP TABLE charges`, // views that read it are resolved lazily: no rename needed
				`CREATE TABLE charges AS SELECT * FROM charges_copy`,
				`DROP TABLE charges_copy`,
				`INSERT INTO charges (id, job_id, attempt_id, account, amount_micros, provider_request_id, created_at) SELECT id + 100, job_id, attempt_id, account, amount_micros, provider_request_id, created_at FROM charges WHERE job_id = 1`)
		}, 1, InvOneCharge},
		{"DuplicatedResult", func(w *world) {
			w.mustExec(`CREATE TABLE results_copy AS SELECT * FROM results`,
				`DROP TABLE results`, // views that read it are resolved lazily: no rename needed
				`CREATE TABLE results AS SELECT * FROM results_copy`,
				`DROP TABLE results_copy`,
				`INSERT INTO results (id, job_id, attempt_id, text, created_at) SELECT id + 100, job_id, attempt_id, 'another text', created_at FROM results WHERE job_id = 1`)
		}, 1, InvOneResult},
		{"AttemptNumberGap", func(w *world) {
			w.mustExec(`INSERT INTO job_attempts (job_id, attempt_number, status, error, lane, started_at, finished_at)
				VALUES (1, 3, 'failed', 'made up', 'drill', '2026-01-01T00:00:00.000000Z', '2026-01-01T00:00:01.000000Z')`)
		}, 1, InvNumbering},
		{"DoneWithoutCharge", func(w *world) {
			w.mustExec(`DELETE FROM charges WHERE job_id = 1`)
		}, 1, InvDoneIffBoth},
		{"FailedWithoutError", func(w *world) {
			w.mustExec(`UPDATE jobs SET status = 'failed', error = NULL WHERE id = 1`)
		}, 1, InvFinishedFields},
		{"ChargeForUnknownRequest", func(w *world) {
			w.mustExec(`UPDATE charges SET provider_request_id = 'simcmpl-never-billed' WHERE job_id = 1`)
		}, 1, InvChargeKnown},
		{"TextNotTheBilledText", func(w *world) {
			w.mustExec(`UPDATE results SET text = 'a text nobody paid for' WHERE job_id = 1`)
		}, 1, InvBilledText},
		{"RecoveryCountsLie", func(w *world) {
			w.mustExec(`INSERT INTO recovery_runs (lane, incarnation, started_at, lock_method, evidence, attempts_closed, attempts_backfilled, jobs_failed)
				VALUES ('drill', 'x', '2026-01-01T00:00:00.000000Z', 'flock', '{"proof":"made up"}', 2, 0, 1)`)
		}, 0, InvRecoveryRun},
		{"SecondBillAtTheSimulator", func(w *world) {
			db, err := sql.Open("sqlite", "file:"+w.sim.LedgerPath+"?_pragma=busy_timeout(5000)")
			if err != nil {
				w.t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec(`UPDATE ledger SET bills = 2`); err != nil {
				w.t.Fatal(err)
			}
		}, 1, InvBilledOnce},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := mustWorld(t)
			if vs := Check(w.evidence(w.mustSnap(KindFinal, "before"))); len(vs) != 0 {
				t.Fatalf("before breaking: %d violations:\n%s", len(vs), joinViolations(vs))
			}
			tt.corrupt(w)
			wantViolation(t, Check(w.evidence(w.mustSnap(KindFinal, "final"))), tt.job, tt.inv)
		})
	}
}

// TestCheck_SecondProviderBills: the same job billed by two providers
// (say, the provider URL changed between attempts) is billed twice.
func TestCheck_SecondProviderBills(t *testing.T) {
	t.Parallel()
	w := mustWorld(t)
	other := simtest.MustStart(t, providersim.Config{})
	prov, err := provider.NewOpenAI(provider.OpenAIConfig{URL: other.URL})
	if err != nil {
		t.Fatal(err)
	}
	st := storetest.MustOpen(t, w.dsn, store.Options{})
	_, err = prov.Generate(context.Background(), inkwell.ProviderRequest{IdempotencyKey: storetest.ProviderKey(t, st, 1, "k1"), Prompt: "a note for k1", MaxWords: 6})
	if err != nil {
		t.Fatal(err)
	}
	s := w.mustSnap(KindFinal, "final")
	s.Ledger = append(s.Ledger, other.MustLedger(t).Entries...)
	wantViolation(t, Check(w.evidence(s)), 1, InvBilledOnce)
}

// TestCheck_RewrittenFinishedAttempt: a finished attempt changed between
// two snapshots. The append-only trigger forbids it, so drop it first.
func TestCheck_RewrittenFinishedAttempt(t *testing.T) {
	t.Parallel()
	w := mustWorld(t)
	before := w.mustSnap(KindCrash, "after crash")
	w.mustExec(`DROP TRIGGER job_attempts_finished_immutable`,
		`UPDATE job_attempts SET error = 'rewritten' WHERE job_id = 1 AND attempt_number = 1`)
	after := w.mustSnap(KindQuiet, "later")
	vs := Check(w.evidence(before, after))
	wantViolation(t, vs, 1, InvFinishedImmutable)
	if !strings.Contains(joinViolations(vs), `error  -> rewritten`) {
		t.Errorf("violation does not say what changed:\n%s", joinViolations(vs))
	}
}

// TestCheck_JobLeftRunning: a job running when serve died is still running
// once the restart reports ready (no recovery happened), and at the end.
func TestCheck_JobLeftRunning(t *testing.T) {
	t.Parallel()
	w := mustWorld(t)
	id := w.mustRun("k2", false)
	crash := w.mustSnap(KindCrash, "after crash")
	if vs := Check(w.evidence(crash)); len(vs) != 0 {
		t.Fatalf("a crash snapshot may show a running job; got:\n%s", joinViolations(vs))
	}
	vs := Check(w.evidence(crash, w.mustSnap(KindRecovered, "after restart"), w.mustSnap(KindFinal, "final")))
	wantViolation(t, vs, id, InvNothingRunning)
	wantViolation(t, vs, 0, InvRecoveryRun) // and no recovery run was written
	wantViolation(t, vs, id, InvAllDone)
}

// TestCheck_RealRecoveryPasses: the store's own recovery, between a crash
// snapshot and the next, satisfies every check the previous test breaks.
func TestCheck_RealRecoveryPasses(t *testing.T) {
	t.Parallel()
	w := mustWorld(t)
	w.mustRun("k2", false)
	crash := w.mustSnap(KindCrash, "after crash")
	st := w.open()
	lock, err := st.LockLane(context.Background(), "drill")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := st.Recover(context.Background(), lock, false)
	lock.Release()
	st.Close()
	if err != nil || rep.AttemptsClosed != 1 {
		t.Fatalf("recover = %+v, %v; want 1 attempt closed", rep, err)
	}
	if vs := Check(w.evidence(crash, w.mustSnap(KindRecovered, "after recovery"))); len(vs) != 0 {
		t.Errorf("after a real recovery: %d violations:\n%s", len(vs), joinViolations(vs))
	}
}

// TestCheck_RefusedRequestLeftARow: the server refused every request with a
// key, yet a job exists for it.
func TestCheck_RefusedRequestLeftARow(t *testing.T) {
	t.Parallel()
	w := mustWorld(t)
	w.sent = []Sent{{Seq: 1, Path: pathJobs, Key: "k1", Outcome: OutcomeRefused, Status: 422}}
	wantViolation(t, Check(w.evidence(w.mustSnap(KindFinal, "final"))), 1, InvNoRowForRefused)
}

// TestCheck_AnswerNamedAnotherJob: the client was told job 7 for its key.
func TestCheck_AnswerNamedAnotherJob(t *testing.T) {
	t.Parallel()
	w := mustWorld(t)
	w.sent[0].JobID = 7
	wantViolation(t, Check(w.evidence(w.mustSnap(KindFinal, "final"))), 1, InvOneJobPerKey)
}

func TestCheck_IntegrityProblemsAreViolations(t *testing.T) {
	t.Parallel()
	w := mustWorld(t)
	// A result pointing at an attempt that does not exist: only the
	// foreign-key check sees it.
	w.mustExec(`UPDATE results SET attempt_id = 999 WHERE job_id = 1`)
	wantViolation(t, Check(w.evidence(w.mustSnap(KindFinal, "final"))), 0, InvIntegrity)
}

// claimAs claims at most one job for lane (nil when nothing is queued) as
// a lane that then dies: under the lane's lock, taken for the claim and
// let go after, so the attempt stays running as a dead lane leaves it.
func claimAs(st *store.Store, lane string) (*store.Claimed, error) {
	ctx := context.Background()
	l, err := st.LockLane(ctx, lane)
	if err != nil {
		return nil, err
	}
	defer l.Release()
	cs, err := st.ClaimUpTo(ctx, l, 1)
	if err != nil || len(cs) == 0 {
		return nil, err
	}
	return cs[0], nil
}
