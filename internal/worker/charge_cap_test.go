package worker_test

// The charge cap (worker.capCharge at Router.WorstCase, store.chargeWithin
// at the reservation) against what accept reserved: the job is accepted
// through the real API (api.Server, its reserve), so the reservation
// compared is the one accept really made.

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/catalog"
	"github.com/inkwell/inkwell/internal/provider"
	"github.com/inkwell/inkwell/internal/provider/providersim"
	"github.com/inkwell/inkwell/internal/provider/providersim/simtest"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
	"github.com/inkwell/inkwell/internal/worker"
)

// acceptViaAPI POSTs body to /v1/jobs of an API server over st that reserves
// with router's catalog and WorstCase, as serve wires them, and returns
// the job it created.
func acceptViaAPI(t *testing.T, st *store.Store, router catalogRouter, key, body string) inkwell.Job {
	t.Helper()
	srv := api.New(api.Config{Store: st, Auth: api.AuthOff, Catalog: router.cat, WorstCase: router.WorstCase})
	srv.SetReady(true)
	req := httptest.NewRequest(http.MethodPost, "/v1/jobs", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	if rec.Code != http.StatusCreated {
		t.Fatalf("POST /v1/jobs %s: %d %s", body, rec.Code, rec.Body)
	}
	var d inkwell.JobDetail
	if err := json.Unmarshal(rec.Body.Bytes(), &d); err != nil {
		t.Fatalf("201 body: %v", err)
	}
	return d.Job
}

// chargeTimeWorstCase is the worst case the lane computes when it charges
// job (its stored payload read back, routed by its model).
func chargeTimeWorstCase(t *testing.T, st *store.Store, router catalogRouter, job inkwell.Job) int64 {
	t.Helper()
	d, err := st.Show(t.Context(), job.ID)
	if err != nil {
		t.Fatal(err)
	}
	w, err := inkwell.ReadPayload(d.Job.Payload)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := router.Route(w.Chat.Model)
	if err != nil {
		t.Fatal(err)
	}
	return router.WorstCase(w, rt.Model)
}

// addBudgetedAccount creates account name with a budget of micros.
func addBudgetedAccount(t *testing.T, st *store.Store, name string, micros int64) {
	t.Helper()
	if _, err := st.CreateAccount(t.Context(), store.Account{Name: name, BudgetMicros: &micros}); err != nil {
		t.Fatal(err)
	}
}

// TestLane_PerTokenPriceReservesWhatAnAmountNamingProviderBills: serve
// --provider openai --provider-micros-per-token 25 in front of
// provider-sim (which, as any provider may, names its bill in
// inkwell_amount_micros). OpenAI.amount charges the named amount, so
// accept's reservation (WorstCaseMicros) must cover it, and the charge is
// the whole bill. WorstCaseMicros used to bound the call as if it were
// priced per token only, far below what the provider legitimately billed,
// and the cap charged the user a tenth of the bill; it now takes the
// larger of the per-token and the per-word bound.
func TestLane_PerTokenPriceReservesWhatAnAmountNamingProviderBills(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		sim := simtest.MustStart(t, providersim.Config{})
		p, err := provider.NewOpenAI(provider.OpenAIConfig{URL: sim.URL, Timeout: 10 * time.Second, MicrosPerToken: 25, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		// singleRoutes (cmd/inkwell/routes.go), for the flags' one provider.
		prov := catalog.Provider{Name: "openai", Kind: catalog.KindOpenAI}
		router := catalogRouter{cat: catalog.Single(prov, p.Model(), inkwell.MaxMaxWords*inkwell.TokensPerWord),
			byProvider: map[string]worker.Route{"openai": {Provider: p}}}
		addBudgetedAccount(t, st, "acme", 1_000_000_000)
		job := acceptViaAPI(t, st, router, "k", `{"prompt":"a poem about the sea","account":"acme","max_words":50}`)
		r, err := st.Reservation(t.Context(), job.ID)
		if err != nil {
			t.Fatal(err)
		}
		obs := &capRecorder{}
		startLane(t, st, worker.Config{Name: "pt", Router: router, Observer: obs}).lane.Wake()
		d := waitJob(t, st, job.ID, "done", isStatus(inkwell.StatusDone))
		billed := sim.MustLedger(t).TotalAmountMicros
		if r.Micros < billed {
			t.Errorf("accept reserved %d micros (WorstCaseMicros, \"an upper bound of what the answer is charged\"); the provider billed %d for the answer", r.Micros, billed)
		}
		if d.Charge == nil || d.Charge.AmountMicros != billed {
			t.Errorf("charge %+v; want the %d micros the provider billed (caps heard: %q)", d.Charge, billed, obs.capped())
		}
	})
}

// TestLane_CapAtTheReservationIsHeard: when the reservation is below the
// request's worst case as the lane computes it from the stored payload
// (a '<' counts one byte in the body accept measured, six once stored
// escaped; or prices raised since the accept), the lane caps the charge
// at the reservation itself, so the cap is logged and heard
// (ChargeCapped), not only applied silently by the store.
func TestLane_CapAtTheReservationIsHeard(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		content := strings.Repeat("<", 400)
		var reported int64
		srv := startWire(t, func(_ int, body map[string]json.RawMessage) (int, string) {
			return 200, string(mustMarshal(map[string]any{
				"id": "chatcmpl-1", "object": "chat.completion", "created": 1767225600, "model": "beta-v2",
				"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": "ok"}, "finish_reason": "stop"}},
				"usage":   map[string]int64{"prompt_tokens": reported, "completion_tokens": 10, "total_tokens": reported + 10},
			}))
		})
		router := singleRoute(t, beta, srv, false, 10*time.Second)
		addBudgetedAccount(t, st, "acme", 1_000_000_000)
		job := acceptViaAPI(t, st, router, "k", `{"account":"acme","model":"beta","messages":[{"role":"user","content":"`+content+`"}],"max_tokens":10}`)
		r, err := st.Reservation(t.Context(), job.ID)
		if err != nil {
			t.Fatal(err)
		}
		worst := chargeTimeWorstCase(t, st, router, job)
		if worst <= r.Micros {
			t.Fatalf("the lane's worst case %d is not above the reservation %d: the body no longer reserves less than the lane's worst case, so no cap at the reservation is tested", worst, r.Micros)
		}
		// Prompt tokens = the stored payload's InputBytes: exactly the
		// lane's worst case, so a cap at the worst case alone would not
		// lower the charge; above the reservation, so the cap at the
		// reservation does.
		d0, _ := st.Show(t.Context(), job.ID)
		w, _ := inkwell.ReadPayload(d0.Job.Payload)
		reported = int64(w.Chat.InputBytes())
		obs := &capRecorder{}
		startLane(t, st, worker.Config{Name: "sc", Router: router, Observer: obs}).lane.Wake()
		d := waitJob(t, st, job.ID, "ended", func(d inkwell.JobDetail) bool {
			return d.Job.Status == inkwell.StatusDone || d.Job.Status == inkwell.StatusFailed
		})
		want := beta.Cost(reported, 10)
		if d.Charge == nil || d.Charge.AmountMicros != r.Micros {
			t.Errorf("charge %+v; want the reservation %d (the answer reported %d)", d.Charge, r.Micros, want)
		}
		if got := obs.capped(); len(got) != 1 {
			t.Errorf("the answer reported %d micros and was charged %d, but ChargeCapped heard %q: want one cap", want, r.Micros, got)
		}
	})
}

// TestLane_SimChargeNeverCapped: the in-process sim bills exactly its
// words, and WorstCaseMicros is exactly that for both forms (unpriced),
// and its usage is within Model.WorstCase (priced, with a prompt of
// one-letter words, two tokens each, the most tokens a byte can carry
// there): the cap never lowers a sim's charge.
func TestLane_SimChargeNeverCapped(t *testing.T) {
	t.Parallel()
	oneLetter := strings.TrimSpace(strings.Repeat("a ", 4000))
	free := inkwell.Model{Name: "free", Provider: "sim", Upstream: "free", MaxOutputTokens: 4000}
	priced := inkwell.Model{Name: "priced", Provider: "sim", Upstream: "priced", InputMicrosPerMTok: 1_000_000, OutputMicrosPerMTok: 1_000_000, MaxOutputTokens: 4000}
	tiny := inkwell.Model{Name: "tiny", Provider: "sim", Upstream: "tiny", MaxOutputTokens: 1}
	router := catalogRouter{
		cat: &catalog.Catalog{Providers: []catalog.Provider{{Name: "sim", Kind: catalog.KindSim}},
			Models: []inkwell.Model{free, priced, tiny}, Default: "free"},
		byProvider: map[string]worker.Route{"sim": {Provider: provider.NewSim(0)}},
	}
	bodies := []string{
		`{"prompt":"hello","account":"acme"}`,
		`{"prompt":"hello","account":"acme","max_words":1}`,
		`{"prompt":"hello","account":"acme","max_words":2000}`,
		`{"prompt":"` + oneLetter + `","account":"acme","max_words":2000,"model":"priced"}`,
		`{"prompt":"hello","account":"acme","max_words":1,"model":"priced"}`,
		`{"account":"acme","model":"free","messages":[{"role":"user","content":"hi"}]}`,
		`{"account":"acme","model":"free","messages":[{"role":"user","content":"hi"}],"max_tokens":1}`,
		`{"account":"acme","model":"free","messages":[{"role":"user","content":"hi"}],"max_tokens":3}`,
		`{"account":"acme","model":"free","messages":[{"role":"user","content":"hi"}],"max_tokens":4000}`,
		`{"account":"acme","model":"tiny","messages":[{"role":"user","content":"hi"}]}`,
		`{"account":"acme","model":"priced","messages":[{"role":"user","content":"` + oneLetter + `"}],"max_tokens":4000}`,
		`{"account":"acme","model":"priced","messages":[{"role":"user","content":"` + oneLetter + `"}],"max_tokens":1}`,
		`{"account":"acme","model":"priced","messages":[{"role":"system","content":"x"},{"role":"user","content":[{"type":"text","text":"` + oneLetter + `"}]}]}`,
	}
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		addBudgetedAccount(t, st, "acme", 1_000_000_000_000)
		var jobs []inkwell.Job
		var reserved []int64
		for i, b := range bodies {
			j := acceptViaAPI(t, st, router, fmt.Sprintf("k%d", i), b)
			r, err := st.Reservation(t.Context(), j.ID)
			if err != nil {
				t.Fatal(err)
			}
			jobs, reserved = append(jobs, j), append(reserved, r.Micros)
		}
		obs := &capRecorder{}
		startLane(t, st, worker.Config{Name: "sim", Router: router, Observer: obs, Concurrency: 4}).lane.Wake()
		for i, j := range jobs {
			d := waitJob(t, st, j.ID, "done", isStatus(inkwell.StatusDone))
			if d.Charge == nil || d.Result == nil {
				t.Fatalf("job %d: no charge or result", j.ID)
			}
			rt, _ := router.Route(d.Charge.Model)
			want := provider.Price(d.Result.Text)
			if rt.Model.Priced() {
				want = rt.Model.Cost(*d.Charge.PromptTokens, *d.Charge.CompletionTokens)
			}
			if d.Charge.AmountMicros != want || want > reserved[i] {
				t.Errorf("body %d: charged %d, the sim's answer costs %d, accept reserved %d", i, d.Charge.AmountMicros, want, reserved[i])
			}
		}
		if got := obs.capped(); len(got) != 0 {
			t.Errorf("caps heard %q; a sim's answer is never past its worst case", got)
		}
	})
}
