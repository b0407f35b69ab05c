package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestServe_OneProvidersRPMDoesNotHoldAnother: docs/providers.md
// says each [[provider]] has its own limiter, shared by the models it
// serves, and that one provider's limits and 429 pause hold that
// provider's calls only. A serve child from a config file with two
// in-process sim providers: "slow" allows one call a minute (rpm = 1),
// "fast" has no limit; --concurrency 2. Five jobs of slow's model are
// submitted, then one of fast's. The fast job should be done within
// seconds. Before the fix the slow jobs claimed after the first sit
// in both slots waiting for slow's limiter (worker Lane.call waits on the
// route's limiter after the claim), and the fast job stays queued until
// they are let go, a minute per slow job.
func TestServe_OneProvidersRPMDoesNotHoldAnother(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "inkwell.toml")
	if err := os.WriteFile(cfg, []byte(`[[provider]]
name = "slow"
kind = "sim"
rpm = 1

[[provider]]
name = "fast"
kind = "sim"

[[model]]
name = "slow-model"
provider = "slow"
max_output_tokens = 20

[[model]]
name = "fast-model"
provider = "fast"
max_output_tokens = 20
`), 0o600); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "inkwell.db")
	srv := startServe(t, db, "--config", cfg, "--concurrency", "2")
	for i := range 5 {
		submit(t, srv.URL, fmt.Sprintf("slow-%d", i), fmt.Sprintf(`{"model":"slow-model","messages":[{"role":"user","content":"slow %d"}]}`, i))
	}
	fast := submit(t, srv.URL, "fast-0", `{"model":"fast-model","messages":[{"role":"user","content":"fast"}]}`)
	st := storetest.MustOpen(t, db, store.Options{})
	deadline := time.Now().Add(10 * time.Second)
	var d inkwell.JobDetail
	for time.Now().Before(deadline) {
		var err error
		if d, err = st.Show(t.Context(), fast.Job.ID); err != nil {
			t.Fatal(err)
		}
		if d.Job.Status == inkwell.StatusDone {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	var slowDone int
	_ = st.DB().QueryRowContext(t.Context(), `SELECT COUNT(*) FROM jobs WHERE status = 'done'`).Scan(&slowDone)
	t.Errorf("the job of provider fast (no limit) is %q 10 s after it was submitted (%d jobs done in all): provider slow's rpm = 1 holds provider fast's work", d.Job.Status, slowDone)
}
