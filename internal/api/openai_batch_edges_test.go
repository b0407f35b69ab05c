package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// pgbLineOf is a valid chat line of exactly size bytes (without its line
// ending): JSON white space pads the object before its closing brace.
func pgbLineOf(t *testing.T, customID string, size int) string {
	t.Helper()
	l := strings.TrimSuffix(chatLine(customID, "a haiku"), "\n")
	pad := size - len(l)
	if pad < 0 {
		t.Fatalf("line %d bytes already", len(l))
	}
	return l[:len(l)-1] + strings.Repeat(" ", pad) + "}"
}

// TestBatchLineAtTheLimit: docs/batches.md's limits table says
// one line is at most MaxBatchLineBytes (1,050,112) bytes and only a line
// over it is refused. A line of exactly that size, followed by another
// line, is a line at the limit: it must be taken, with LF and with CRLF
// endings (the ending is not the line's content); one byte more is 400
// naming the line, nothing written.
func TestBatchLineAtTheLimit(t *testing.T) {
	t.Parallel()
	e := oaEnv(t, storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{}), api.Config{})
	for _, eol := range []string{"\n", "\r\n"} {
		content := pgbLineOf(t, "big"+fmt.Sprint(len(eol)), api.MaxBatchLineBytes) + eol + strings.TrimSuffix(chatLine("small"+fmt.Sprint(len(eol)), "x"), "\n") + eol
		f := e.upload("", "batch", "limit.jsonl", content).file(t)
		r := e.createBatch("", createBody(f.ID, ""))
		if r.status != http.StatusOK {
			t.Errorf("a line of exactly %d bytes (ending %q): %d %s; want it taken (only a line over the limit is refused)", api.MaxBatchLineBytes, eol, r.status, r.body)
		} else if b := r.openAIBatch(t); b.RequestCounts.Total != 2 {
			t.Errorf("batch %+v; want 2 lines", b)
		}
	}
	over := pgbLineOf(t, "over", api.MaxBatchLineBytes+1) + "\n"
	f := e.upload("", "batch", "over.jsonl", over).file(t)
	before := e.snapshot()
	got := assertError(t, e.createBatch("", createBody(f.ID, "")), http.StatusBadRequest, inkwell.EINVALID)
	if !strings.Contains(got.Message, "line 1") {
		t.Errorf("a line one byte over the limit: %q; want it named", got.Message)
	}
	e.assertUnchanged("a line over the limit", before)
}

// TestBatchBudgetRace: batches of different files created at
// once, on both dialects (PostgreSQL: concurrent transactions), when the
// account's budget covers only some of them: exactly as many are stored
// as the budget covers, every other is 402 with nothing of it written (no
// batch row, no job), and the account reserves exactly the stored lines'
// worst cases.
func TestBatchBudgetRace(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, st *store.Store) {
		const racers, perBatch, cost = 8, 5, int64(1_000)
		budget := 3*perBatch*cost + cost/2 // room for 3 batches, not 4
		if _, err := st.CreateAccount(t.Context(), store.Account{Name: "acme", BudgetMicros: &budget}); err != nil {
			t.Fatal(err)
		}
		e := oaEnv(t, st, api.Config{WorstCase: func(inkwell.Work, inkwell.Model) int64 { return cost }})
		var files []string
		for i := range racers {
			var c strings.Builder
			for j := range perBatch {
				fmt.Fprintf(&c, `{"custom_id":"l%d","method":"POST","url":"/v1/chat/completions","body":{"messages":[{"role":"user","content":"hi %d"}],"account":"acme"}}`+"\n", j, i)
			}
			files = append(files, e.upload("", "batch", "f.jsonl", c.String()).file(t).ID)
		}
		replies := make([]reply, racers)
		errs := make([]error, racers)
		done := make(chan int)
		for i := range racers {
			go func() {
				replies[i], errs[i] = send(e.srv, http.MethodPost, "/v1/batches", map[string]string{"Content-Type": "application/json"}, createBody(files[i], ""))
				done <- i
			}()
		}
		for range racers {
			<-done
		}
		ok, refused := 0, 0
		for i, r := range replies {
			switch {
			case errs[i] != nil:
				t.Fatalf("create %d: %v", i, errs[i])
			case r.status == http.StatusOK:
				ok++
			case r.status == http.StatusPaymentRequired:
				refused++
			default:
				t.Errorf("create %d: %d %s; want 200 or 402", i, r.status, r.body)
			}
		}
		got := countRows(t, st, "batches", "jobs")
		a, err := st.Account(t.Context(), "acme")
		if err != nil {
			t.Fatal(err)
		}
		if ok != 3 || refused != racers-3 || got["batches"] != 3 || got["jobs"] != 3*perBatch || a.ReservedMicros != 3*perBatch*cost {
			t.Errorf("%d stored, %d refused, rows %v, reserved %d; want 3 stored (%d jobs, %d reserved), %d refused", ok, refused, got, a.ReservedMicros, 3*perBatch, 3*perBatch*cost, racers-3)
		}
	})
}
