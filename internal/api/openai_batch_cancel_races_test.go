package api_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// Cancels of an OpenAI-form batch (POST /v1/batches/{id}/cancel) that
// race what else happens to it: a completion of its running line or of
// its last line, other cancels of the same batch; and a cancel of another
// account's batch, sent again and again.

// TestOpenAIBatch_CancelRacingCompletionsEndsEveryLine: a cancel racing
// the completion of a batch's running line (a line still queued behind
// it): always 200, the batch cancelled with every line ended, cancelled_at
// in the database, and each job with at most one cancel audit row. A
// cancel racing the completion of a batch's last line: 200 or (the
// completion first) 409, never anything else, and the batch reads
// completed exactly when the answer was 409. An unknown batch, by either
// form of its id, is 404 (another account's batch is
// TestSecurity_CancelOfAnotherAccountsBatchIsNotFound).
func TestOpenAIBatch_CancelRacingCompletionsEndsEveryLine(t *testing.T) {
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		e := oaEnv(t, st, api.Config{})
		rounds := 25
		if testing.Short() || raceDetector {
			rounds = 5
		}
		var unmarked []string
		outcomes := map[string]int{}
		for round := range rounds {
			id := createJobsBatch(t, e, fmt.Sprint("race-", round), 3)
			completeNext(t, st)                           // line 1 done
			running := storetest.ClaimAs(t, st, "lane-a") // line 2 running
			// line 3 queued
			var wg sync.WaitGroup
			gate := make(chan struct{})
			answers := make([]reply, 1) // one cancel: TestOpenAIBatch_ConcurrentCancelsCancelEachJobOnce races several
			for i := range answers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-gate
					answers[i] = e.do(http.MethodPost, fmt.Sprintf("/v1/batches/batch_%d/cancel", id), nil, "")
				}()
			}
			var cerr error
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gate
				if round%2 == 1 {
					time.Sleep(time.Duration(round%5) * time.Millisecond)
				}
				cerr = st.CompleteIfRunning(context.Background(), store.CompleteParams{JobID: running.Job.ID, AttemptID: running.Attempt.ID,
					Text: "t", Account: inkwell.DefaultAccount, AmountMicros: 1, ProviderRequestID: fmt.Sprint("r-", round)})
			}()
			close(gate)
			wg.Wait()
			for _, r := range answers {
				if r.status != http.StatusOK {
					t.Errorf("round %d: a cancel racing a completion: %d %s", round, r.status, r.body) // the queued line 3 makes 409 wrong
				}
			}
			if cerr != nil {
				outcomes["completion refused: "+inkwell.ErrorCode(cerr)]++
			} else {
				outcomes["completion stored"]++
			}
			b := e.do(http.MethodGet, fmt.Sprintf("/v1/batches/batch_%d", id), nil, "").openAIBatch(t)
			if b.Status != "cancelled" || b.RequestCounts.Completed+b.RequestCounts.Failed != 3 {
				t.Errorf("round %d: batch %+v; want cancelled, every line ended", round, b)
			}
			if queryCount(t, st, `SELECT COUNT(*) FROM batches WHERE id = $1 AND cancelled_at IS NULL`, id) != 0 {
				unmarked = append(unmarked, fmt.Sprint(id))
			}
			if d := queryCount(t, st, `SELECT COUNT(*) FROM (SELECT job_id FROM audit_log WHERE action = $1 AND job_id IN (SELECT id FROM jobs WHERE batch_id = $2) GROUP BY job_id HAVING COUNT(*) > 1) d`, store.AuditCancel, id); d != 0 {
				t.Errorf("round %d: %d jobs with more than one cancel audit row", round, d)
			}
		}
		t.Logf("completions racing the cancel: %v", outcomes)
		if len(unmarked) > 0 {
			t.Errorf("batches %v read cancelled but have no cancelled_at in the database: the cancel found no running job left (its completion committed between the cancel's first transaction and its read of the running jobs) and returned before markCancelledTx", unmarked)
		}

		// A batch whose last running line completes: the cancel races
		// its end, 200 or 409, never anything else.
		for round := range rounds {
			id := createJobsBatch(t, e, fmt.Sprint("last-", round), 1)
			running := storetest.ClaimAs(t, st, "lane-a")
			var wg sync.WaitGroup
			var r reply
			wg.Add(2)
			go func() {
				defer wg.Done()
				r = e.do(http.MethodPost, fmt.Sprintf("/v1/batches/batch_%d/cancel", id), nil, "")
			}()
			go func() {
				defer wg.Done()
				_ = st.CompleteIfRunning(context.Background(), store.CompleteParams{JobID: running.Job.ID, AttemptID: running.Attempt.ID,
					Text: "t", Account: inkwell.DefaultAccount, AmountMicros: 1, ProviderRequestID: fmt.Sprint("l-", round)})
			}()
			wg.Wait()
			if r.status != http.StatusOK && r.status != http.StatusConflict {
				t.Errorf("round %d: cancel racing the last completion: %d %s", round, r.status, r.body)
			}
			b := e.do(http.MethodGet, fmt.Sprintf("/v1/batches/batch_%d", id), nil, "").openAIBatch(t)
			if (r.status == http.StatusConflict) != (b.Status == "completed") || b.RequestCounts.Completed+b.RequestCounts.Failed != 1 {
				t.Errorf("round %d: cancel %d, batch %s %+v", round, r.status, b.Status, b.RequestCounts)
			}
		}
		for _, p := range []string{"/v1/batches/batch_999999/cancel", "/v1/batches/999999/cancel"} {
			assertError(t, e.do(http.MethodPost, p, nil, ""), http.StatusNotFound, inkwell.ENOTFOUND)
		}
	})
}

// TestOpenAIBatch_ConcurrentCancelsCancelEachJobOnce: 8 cancels of one
// batch at once (an SDK's retry racing its first send), one line running
// and two queued, nothing completing: "a re-sent cancel answers the batch
// as it is", so every answer is 200 and cancelled, and each job is
// cancelled (and audited) once.
func TestOpenAIBatch_ConcurrentCancelsCancelEachJobOnce(t *testing.T) {
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		e := oaEnv(t, st, api.Config{})
		for round := range 5 {
			id := createJobsBatch(t, e, fmt.Sprint("cc-", round), 3)
			running := storetest.ClaimAs(t, st, "lane-a")
			var wg sync.WaitGroup
			gate := make(chan struct{})
			answers := make([]reply, 8)
			for i := range answers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-gate
					answers[i] = e.do(http.MethodPost, fmt.Sprintf("/v1/batches/batch_%d/cancel", id), nil, "")
				}()
			}
			close(gate)
			wg.Wait()
			for i, r := range answers {
				if r.status != http.StatusOK {
					t.Errorf("round %d, cancel %d of 8 at once: %d %s", round, i, r.status, r.body)
				}
			}
			b := e.do(http.MethodGet, fmt.Sprintf("/v1/batches/batch_%d", id), nil, "").openAIBatch(t)
			if b.Status != "cancelled" || b.RequestCounts.Failed != 3 {
				t.Errorf("round %d: batch %+v; want cancelled, 3 failed", round, b)
			}
			if n := queryCount(t, st, `SELECT COUNT(*) FROM audit_log WHERE action = $1 AND job_id IN (SELECT id FROM jobs WHERE batch_id = $2)`, store.AuditCancel, id); n != 3 {
				t.Errorf("round %d: %d cancel audit rows, want 3", round, n)
			}
			if got := e.hooked(); !slices.Contains(got, running.Attempt.ID) {
				t.Errorf("round %d: the running attempt %d was not aborted (OnCancelled %v)", round, running.Attempt.ID, got)
			}
		}
	})
}

// TestSecurity_CancelOfAnotherAccountsBatchIsNotFound: a client token
// cancelling another account's batch, repeatedly, gets 404 in the words of
// a batch that does not exist, and nothing is written.
func TestSecurity_CancelOfAnotherAccountsBatchIsNotFound(t *testing.T) {
	t.Parallel()
	se := setupSecurity(t, api.AuthAuto)
	before := se.snapshot()
	for range 3 {
		for _, id := range []string{fmt.Sprintf("batch_%d", se.acmeBatch), fmt.Sprint(se.acmeBatch)} {
			other := se.req(http.MethodPost, "/v1/batches/"+id+"/cancel", "Bearer "+se.globex, nil, nil)
			none := se.req(http.MethodPost, "/v1/batches/batch_999999/cancel", "Bearer "+se.globex, nil, nil)
			got := assertError(t, other, http.StatusNotFound, inkwell.ENOTFOUND).Message
			want := strings.Replace(assertError(t, none, http.StatusNotFound, inkwell.ENOTFOUND).Message, "999999", fmt.Sprint(se.acmeBatch), 1)
			if got != want {
				t.Errorf("another account's batch is worded %q, a missing one %q", got, want)
			}
		}
	}
	se.assertUnchanged(before)
}
