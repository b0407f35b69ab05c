package drill

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/crashpoint"
	"github.com/inkwell/inkwell/internal/provider"
	"github.com/inkwell/inkwell/internal/provider/providersim"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// claudeItem is the drill's chat-form request on drill-claude under key.
func claudeItem(key string) item {
	return item{key: key, model: modelClaude, req: inkwell.Request{Prompt: "a note for " + key, Account: "acct", MaxWords: 6}}
}

// mustAcceptClaude accepts key's chat-form request on drill-claude, as the
// API does: the payload it stores, and its worst case reserved.
func (w *world) mustAcceptClaude(key string) int64 {
	w.t.Helper()
	it := claudeItem(key)
	wk, err := inkwell.ReadPayload(it.body())
	if err != nil {
		w.t.Fatal(err)
	}
	payload := inkwell.ChatPayload(wk.Chat, "acct", nil)
	st := w.open()
	defer st.Close()
	job, _, err := st.Accept(context.Background(), store.AcceptParams{IdempotencyKey: key, RequestHash: inkwell.RequestHash(payload), Payload: payload,
		Account: "acct", ReserveMicros: worstCase(drillCatalog(), it)})
	if err != nil {
		w.t.Fatal(err)
	}
	w.keys = append(w.keys, key)
	w.sent = append(w.sent, Sent{Seq: len(w.sent) + 1, Path: pathJobs, Key: key, JobID: job.ID, Outcome: OutcomeOK, Status: 201})
	return job.ID
}

// mustCallClaude calls the anthropic provider for claim c under its job's
// key, as the worker does (the model's upstream name and output bound),
// and with complete stores the answer, charged its usage at the model's
// prices.
func (w *world) mustCallClaude(st *store.Store, c *store.Claimed, complete bool) {
	w.t.Helper()
	ctx := context.Background()
	m, _, err := drillCatalog().Lookup(modelClaude)
	if err != nil {
		w.t.Fatal(err)
	}
	wk, err := inkwell.ReadPayload(c.Job.Payload)
	if err != nil {
		w.t.Fatal(err)
	}
	chat := wk.Chat
	chat.Model, chat.MaxOutputTokens = m.Upstream, m.OutputBound(wk.Chat)
	prov, err := provider.NewAnthropic(provider.AnthropicConfig{URL: w.sim.URL, Timeout: 10 * time.Second})
	if err != nil {
		w.t.Fatal(err)
	}
	resp, err := prov.Generate(ctx, inkwell.ProviderRequest{IdempotencyKey: storetest.ProviderKey(w.t, st, c.Job.ID, c.Job.IdempotencyKey),
		Chat: chat, Prompt: chat.LastUserText(), MaxWords: chat.MaxOutputTokens / inkwell.TokensPerWord})
	if err != nil {
		w.t.Fatal(err)
	}
	if !complete {
		return
	}
	err = st.CompleteIfRunning(ctx, store.CompleteParams{JobID: c.Job.ID, AttemptID: c.Attempt.ID, Text: resp.Text,
		Account: "acct", AmountMicros: m.Cost(resp.PromptTokens, resp.CompletionTokens), ProviderRequestID: resp.RequestID,
		Model: m.Name, Response: resp.Response, FinishReason: resp.FinishReason,
		PromptTokens: resp.PromptTokens, CompletionTokens: resp.CompletionTokens, Usage: resp.Usage})
	if err != nil {
		w.t.Fatal(err)
	}
}

// mustClaim claims the next queued job as a lane that then dies.
func (w *world) mustClaim(st *store.Store) *store.Claimed {
	w.t.Helper()
	c, err := claimAs(st, "drill")
	if err != nil || c == nil {
		w.t.Fatalf("claim: %v %v", c, err)
	}
	return c
}

// mustRecover runs the store's own startup recovery of lane drill.
func (w *world) mustRecover() {
	w.t.Helper()
	ctx := context.Background()
	st := w.open()
	defer st.Close()
	lock, err := st.LockLane(ctx, "drill")
	if err != nil {
		w.t.Fatal(err)
	}
	defer lock.Release()
	if _, err := st.Recover(ctx, lock, false); err != nil {
		w.t.Fatal(err)
	}
}

// mustRetry retries job id, as a client does, and logs the request.
func (w *world) mustRetry(id int64) {
	w.t.Helper()
	st := w.open()
	defer st.Close()
	if _, err := st.RetryIfFailed(context.Background(), id, store.ActorCLI); err != nil {
		w.t.Fatal(err)
	}
	w.sent = append(w.sent, Sent{Seq: len(w.sent) + 1, Path: fmt.Sprintf("%s/%d/retry", pathJobs, id), JobID: id, Outcome: OutcomeOK, Status: 200})
}

// claudeEvidence is the world's evidence judged with the drill's models.
func (w *world) claudeEvidence(snaps ...Snapshot) Evidence {
	e := w.evidence(snaps...)
	e.Catalog = drillCatalog()
	return e
}

// TestCheck_ClaudeHealthyWorld: a short-form job on drill and a chat job
// on drill-claude, each done once, break nothing; the message is billed
// under the job's key without it being honoured, and the charge is the
// answer's usage at drill-claude's prices, not the simulator's price.
func TestCheck_ClaudeHealthyWorld(t *testing.T) {
	t.Parallel()
	w := mustWorld(t) // job 1 on drill
	id := w.mustAcceptClaude("k2")
	st := w.open()
	w.mustCallClaude(st, w.mustClaim(st), true)
	st.Close()
	s := w.mustSnap(KindFinal, "final")
	if vs := Check(w.claudeEvidence(s)); len(vs) != 0 {
		t.Fatalf("healthy world: %d violations:\n%s", len(vs), joinViolations(vs))
	}
	i := slices.IndexFunc(s.Ledger, func(e providersim.LedgerEntry) bool { return e.Kind == providersim.KindMessages })
	if i < 0 || s.Ledger[i].Key != "" || s.Ledger[i].SentKey != s.Installation.ProviderKey(id, "k2") {
		t.Fatalf("ledger %+v; want a message billed under job %d's key, not honoured", s.Ledger, id)
	}
	ch := s.chargesOf(id)[0]
	if ch.AmountMicros == s.Ledger[i].AmountMicros || ch.Model.String != modelClaude || !ch.CompletionTokens.Valid {
		t.Errorf("charge %+v; want drill-claude's price of the usage, not the simulator's %d", ch, s.Ledger[i].AmountMicros)
	}
}

// TestCheck_ClaudeSecondBill: a job on drill-claude billed twice is
// allowed, and counted, when an attempt of it ended worker_restarted (its
// answer lost with the process); without one, it is a violation.
func TestCheck_ClaudeSecondBill(t *testing.T) {
	t.Parallel()
	t.Run("AfterWorkerRestarted", func(t *testing.T) {
		t.Parallel()
		w := emptyWorld(t)
		id := w.mustAcceptClaude("k1")
		st := w.open()
		w.mustCallClaude(st, w.mustClaim(st), false) // answered and billed; serve dies before storing it
		st.Close()
		crash := w.mustSnap(KindCrash, "after crash")
		w.mustRecover()
		rec := w.mustSnap(KindRecovered, "after restart")
		w.mustRetry(id)
		st = w.open()
		w.mustCallClaude(st, w.mustClaim(st), true) // billed again: no key is honoured
		st.Close()
		final := w.mustSnap(KindFinal, "final")
		if vs := Check(w.claudeEvidence(crash, rec, final)); len(vs) != 0 {
			t.Fatalf("%d violations:\n%s", len(vs), joinViolations(vs))
		}
		tl := &Timeline{Keys: w.keys, Claude: []string{"k1"}, Snaps: []Snapshot{crash, rec, final}, Crash: 0, Recovered: 1, Final: 2}
		if jobs, second := tl.secondBills(final); jobs != 1 || second != 1 {
			t.Errorf("second bills: %d job(s), %d second bill(s); want 1 and 1", jobs, second)
		}
		if got := tl.secondBillsCell(); got != "1" {
			t.Errorf("second bills cell %q, want 1", got)
		}
		if got := tl.read(final).bills; got != "2 / 2" {
			t.Errorf("final bills %q, want 2 / 2", got)
		}
	})
	t.Run("WithoutAnAnswerLost", func(t *testing.T) {
		t.Parallel()
		w := emptyWorld(t)
		id := w.mustAcceptClaude("k1")
		st := w.open()
		c := w.mustClaim(st)
		w.mustCallClaude(st, c, false) // a call made twice by one attempt: a bug
		w.mustCallClaude(st, c, true)
		st.Close()
		wantViolation(t, Check(w.claudeEvidence(w.mustSnap(KindFinal, "final"))), id, InvUnkeyedBills)
	})
	t.Run("KeyedProviderStillOnce", func(t *testing.T) {
		t.Parallel()
		// On drill, whose provider honours keys, the same story bills
		// once (the retry is answered from the record), and a restart
		// allows no second bill.
		w := emptyWorld(t)
		id := w.mustAccept("k1")
		st := w.open()
		w.mustCall(st, w.mustClaim(st), false)
		st.Close()
		w.mustRecover()
		w.mustRetry(id)
		st = w.open()
		w.mustCall(st, w.mustClaim(st), true)
		st.Close()
		if vs := Check(w.claudeEvidence(w.mustSnap(KindFinal, "final"))); len(vs) != 0 {
			t.Fatalf("%d violations:\n%s", len(vs), joinViolations(vs))
		}
		db, err := sql.Open("sqlite", "file:"+w.sim.LedgerPath+"?_pragma=busy_timeout(5000)")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(`UPDATE ledger SET bills = 2`); err != nil {
			t.Fatal(err)
		}
		wantViolation(t, Check(w.claudeEvidence(w.mustSnap(KindFinal, "final"))), id, InvBilledOnce)
	})
}

// TestCheck_ClaudeBrokenCharge: a priced charge that is not its usage at
// the model's prices, a usage that is not the provider's count, a charge
// naming a message sent under another key, and a reservation that is not
// the worst case are each caught.
func TestCheck_ClaudeBrokenCharge(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		break_ func(w *world)
		inv    string
	}{
		{"AmountNotTheUsageAtThePrices", func(w *world) {
			w.mustExec(`UPDATE charges SET amount_micros = amount_micros + 1 WHERE job_id = 2`)
		}, InvPricedCharge},
		{"AmountAtTheSimulatorsPrice", func(w *world) {
			w.mustExec(`UPDATE charges SET amount_micros = 6000 WHERE job_id = 2`) // 6 words at MicrosPerWord
		}, InvPricedCharge},
		{"CompletionTokensNotTheBilledText", func(w *world) {
			// Amount kept consistent with the tokens, both wrong.
			w.mustExec(`UPDATE charges SET completion_tokens = completion_tokens + 2,
				amount_micros = (prompt_tokens * 3000000 + (completion_tokens + 2) * 15000000 + 999999) / 1000000 WHERE job_id = 2`)
		}, InvPricedCharge},
		{"ChargeWithoutUsage", func(w *world) {
			w.mustExec(`UPDATE charges SET prompt_tokens = NULL WHERE job_id = 2`)
		}, InvPricedCharge},
		{"ChargeNamesAnotherModel", func(w *world) {
			w.mustExec(`UPDATE charges SET model = 'drill' WHERE job_id = 2`)
		}, InvPricedCharge},
		{"ChargeNamesAMessageOfAnotherKey", func(w *world) {
			w.mustExec(`UPDATE charges SET provider_request_id = (SELECT provider_request_id FROM charges WHERE job_id = 3) WHERE job_id = 2`)
		}, InvChargeKnown},
		{"ReservationNotTheWorstCase", func(w *world) {
			w.mustExec(`UPDATE jobs SET reservation_micros = reservation_micros - 1 WHERE id = 2`)
		}, InvReservedWorst},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := emptyWorld(t)
			st := w.open()
			budget := int64(DrillBudgetMicros)
			if _, err := st.CreateAccount(context.Background(), store.Account{Name: "acct", BudgetMicros: &budget}); err != nil {
				t.Fatal(err)
			}
			st.Close()
			// Job 1 on drill, reserving its worst case there; jobs 2 and 3
			// on drill-claude.
			w.reserve = worstCase(drillCatalog(), item{req: inkwell.Request{Prompt: "a note for k1", Account: "acct", MaxWords: 6}})
			w.mustRun("k1", true)
			for _, key := range []string{"k2", "k3"} {
				w.mustAcceptClaude(key)
				st := w.open()
				w.mustCallClaude(st, w.mustClaim(st), true)
				st.Close()
			}
			if vs := Check(w.claudeEvidence(w.mustSnap(KindFinal, "before"))); len(vs) != 0 {
				t.Fatalf("before breaking: %d violations:\n%s", len(vs), joinViolations(vs))
			}
			tt.break_(w)
			wantViolation(t, Check(w.claudeEvidence(w.mustSnap(KindFinal, "final"))), 2, tt.inv)
		})
	}
}

// TestUnkeyedPaths: on drill-claude the points' paths are the same with
// every answered call billed: where a repeat is answered from the record
// (2 / 1), it is billed again (2 / 2).
func TestUnkeyedPaths(t *testing.T) {
	t.Parallel()
	got := unkeyed(expect(crashpoint.CompleteBeforeCommit))
	want := orphan("1 / 1", "2 / 2")
	if !slices.Equal(got, want) {
		t.Errorf("unkeyed paths %v, want %v", got, want)
	}
	if got := unkeyed(expect(crashpoint.ClaimAfterCommit)); !slices.Equal(got, expect(crashpoint.ClaimAfterCommit)) {
		t.Errorf("claim.after-commit: unkeyed paths %v differ, but no call is repeated there", got)
	}
	tl := &Timeline{Point: crashpoint.CompleteBeforeCommit, Hit: 1, Keys: []string{"k"}, Claude: []string{"k"}}
	if ps, ok := tl.paths(); !ok || !slices.Equal(ps, want) {
		t.Errorf("a one-job scenario on drill-claude: paths %v, want %v", ps, want)
	}
}

// TestClaudeWorkloads: the one job at every other point (complete.before-
// commit, where a paid answer is lost, among them) and every third job of
// a workload is the chat form on drill-claude, which serve reads back as
// a chat request naming the model; the others stay the short form.
func TestClaudeWorkloads(t *testing.T) {
	t.Parallel()
	if !onClaude(crashpoint.CompleteBeforeCommit) || onClaude(crashpoint.ProviderAfterCall) {
		t.Errorf("onClaude: want complete.before-commit on drill-claude and provider.after-call on drill")
	}
	var claude []string
	for _, p := range crashpoint.Names {
		sc := pointScenario(p, 1, 1)
		if sc.family == "" && sc.items()[0].model == modelClaude {
			claude = append(claude, p)
		}
	}
	if len(claude) < 3 {
		t.Errorf("one-job scenarios on drill-claude: %v; want every other point", claude)
	}
	items := pointScenario(crashpoint.ClaimAfterCommit, 1, 5).items()
	for i, it := range items {
		w, err := inkwell.ReadPayload(it.body())
		if err != nil {
			t.Fatal(err)
		}
		if onIt := i == 2; (it.model == modelClaude) != onIt || (w.Short == nil) != onIt || (onIt && w.Chat.Model != modelClaude) {
			t.Errorf("sweep job %d: model %q, read back as %+v; want drill-claude only for job 3", i+1, it.model, w.Chat)
		}
	}
	pl := makePlan(1, Config{Short: true}.limits(), crashpoint.Names)
	for _, items := range pl.workloads("r") {
		for j, it := range items {
			if (it.model == modelClaude) != (j%3 == 2) {
				t.Errorf("random request %s on %q", it.key, it.model)
			}
		}
	}
}
