package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/provider/providersim"
	"github.com/inkwell/inkwell/internal/provider/providersim/simtest"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestServe_ConcurrentPricedAcceptsNeverOverspend: a serve child
// run from a config file with a priced model (the provider simulator
// behind an openai provider, slow, so every reservation is still open
// while the requests arrive), and an account whose budget holds three of
// the request's worst cases. Twelve requests at once, each with its own
// key: exactly as many are accepted as the budget holds, the others are
// 402 and write nothing; a re-send of an accepted one is the same job;
// once done, each charge is at most its reservation and the account's
// spend is within its budget. SQLite and PostgreSQL.
func TestServe_ConcurrentPricedAcceptsNeverOverspend(t *testing.T) {
	t.Parallel()
	storetest.RunBackends(t, func(t *testing.T, b storetest.Backend) {
		sim := simtest.MustStart(t, providersim.Config{Latency: 1500 * time.Millisecond})
		cfg := filepath.Join(t.TempDir(), "inkwell.toml")
		if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`[[provider]]
name = "up"
kind = "openai"
url = %q

[[model]]
name = "priced"
provider = "up"
input_micros_per_mtok = 1000000
output_micros_per_mtok = 1000000
max_output_tokens = 1000
`, sim.URL)), 0o600); err != nil {
			t.Fatal(err)
		}
		st := storetest.MustOpen(t, b.DSN, store.Options{})
		// The request's worst case: its bytes and 1,000 output tokens at
		// 1 micro each, a little over 1,000 micros; 3,500 holds three.
		if code, out, errOut := runCLI(t, "accounts", "add", "acme", "--budget", "0.0035", "--db", b.DSN); code != 0 {
			t.Fatalf("accounts add = %d\n%s%s", code, out, errOut)
		}
		srv := startServe(t, b.DSN, "--config", cfg)
		body := func(i int) string {
			return fmt.Sprintf(`{"model":"priced","account":"acme","messages":[{"role":"user","content":"line %02d"}]}`, i)
		}
		post := func(key, body string) (int, string) {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/jobs", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", key)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return 0, ""
			}
			defer res.Body.Close()
			raw, _ := io.ReadAll(res.Body)
			return res.StatusCode, string(raw)
		}
		const n = 12
		status := make([]int, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				status[i], _ = post(fmt.Sprintf("k%02d", i), body(i))
			}()
		}
		wg.Wait()
		created, refused := 0, 0
		firstCreated := -1
		for i, s := range status {
			switch s {
			case http.StatusCreated:
				created++
				if firstCreated < 0 {
					firstCreated = i
				}
			case http.StatusPaymentRequired:
				refused++
			default:
				t.Errorf("request %d: status %d, want 201 or 402", i, s)
			}
		}
		if created != 3 || refused != n-3 {
			t.Fatalf("%d accepted, %d refused 402; want 3 and %d (the budget holds three worst cases)", created, refused, n-3)
		}
		if jobs := countRowsIn(t, st, "jobs"); jobs != 3 {
			t.Errorf("%d jobs stored, want 3: a 402 writes nothing", jobs)
		}
		// A re-send of an accepted request, past the budget, is its job.
		if s, raw := post(fmt.Sprintf("k%02d", firstCreated), body(firstCreated)); s != http.StatusOK {
			t.Errorf("re-send of an accepted request: %d %s; want 200", s, raw)
		}
		storetest.WaitFor(t, waitLimit, "three jobs done", func() bool {
			var done int
			_ = st.DB().QueryRowContext(t.Context(), `SELECT COUNT(*) FROM jobs WHERE status = 'done'`).Scan(&done)
			return done == 3
		})
		var spent int64
		for id := int64(1); id <= 3; id++ {
			d, err := st.Show(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			r, err := st.Reservation(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			if d.Job.Status != inkwell.StatusDone || d.Charge == nil || d.Charge.AmountMicros <= 0 || d.Charge.AmountMicros > r.Micros {
				t.Errorf("job %d: %s, charge %+v, reservation %+v; want done, charged more than 0 and at most the reservation", id, d.Job.Status, d.Charge, r)
				continue
			}
			spent += d.Charge.AmountMicros
		}
		if spent > 3500 {
			t.Errorf("spent %d micros of a 3,500 budget", spent)
		}
		if jobs := countRowsIn(t, st, "jobs"); jobs != 3 {
			t.Errorf("%d jobs after the re-send, want 3", jobs)
		}
	})
}
