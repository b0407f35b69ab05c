package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/webhook"
)

// BenchmarkWebhookEndCPU: what the delivery trigger (migration 0010) adds
// to a job's three writes (accept, claim, complete), in this process's CPU
// per job on SQLite (synchronous=NORMAL, as BenchmarkJobWriteCPU):
// "none" has no account with a webhook (the trigger's WHEN clause stops at
// one index probe), "other" has one but the job's account has none (the
// payload's account is read), "webhook" writes a delivery row per job.
//
//	go test -run xxx -bench WebhookEndCPU -benchtime 2000x -count 6 ./internal/bench
func BenchmarkWebhookEndCPU(b *testing.B) {
	for _, tc := range []struct{ name, hooked, account string }{
		{"none", "", "acme"},
		{"other", "other", "acme"},
		{"webhook", "acme", "acme"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			st, err := store.Open(ctx, benchDSN(b, "sqlite"), store.Options{Synchronous: "NORMAL"})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			if tc.hooked != "" {
				if _, err := st.CreateAccount(ctx, store.Account{Name: tc.hooked, WebhookURL: "http://127.0.0.1:9/hook"}); err != nil {
					b.Fatal(err)
				}
			}
			lock, err := st.LockLane(ctx, "local")
			if err != nil {
				b.Fatal(err)
			}
			defer lock.Release()
			payload := []byte(fmt.Sprintf(`{"prompt":"p","account":%q,"max_words":10}`, tc.account))
			cpu0 := processCPU()
			b.ResetTimer()
			for i := range b.N {
				endOneJob(b, st, lock, fmt.Sprint("k", i), payload)
			}
			b.StopTimer()
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/job")
			ds, err := st.WebhookDeliveries(ctx, store.WebhookFilter{Limit: b.N + 1})
			if err != nil {
				b.Fatal(err)
			}
			if want := map[bool]int{true: b.N, false: 0}[tc.hooked == tc.account]; len(ds) != want {
				b.Fatalf("%d deliveries, want %d", len(ds), want)
			}
		})
	}
}

// endOneJob accepts, claims and completes one job.
func endOneJob(b *testing.B, st *store.Store, lock *store.LaneLock, key string, payload []byte) {
	ctx := context.Background()
	if _, _, err := st.Accept(ctx, store.AcceptParams{IdempotencyKey: key, RequestHash: "h", Payload: payload}); err != nil {
		b.Fatal(err)
	}
	cs, err := st.ClaimUpTo(ctx, lock, 1)
	if err != nil || len(cs) != 1 {
		b.Fatalf("claim: %v %v", cs, err)
	}
	if err := st.CompleteIfRunning(ctx, store.CompleteParams{JobID: cs[0].Job.ID, AttemptID: cs[0].Attempt.ID,
		Text: "ink", Account: "acme", AmountMicros: 1, ProviderRequestID: "r" + key}); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkWebhookSend: deliveries per second one sender posts to a
// receiver on loopback that answers 204 at once, claims and outcomes
// included, on each dialect (synchronous=FULL on SQLite).
//
//	go test -run xxx -bench WebhookSend -benchtime 2000x ./internal/bench
func BenchmarkWebhookSend(b *testing.B) {
	for _, db := range []string{"sqlite", "postgres"} {
		b.Run(db, func(b *testing.B) {
			ctx := context.Background()
			rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.WriteHeader(http.StatusNoContent)
			}))
			defer rcv.Close()
			st := benchOpen(b, benchDSN(b, db), nil)
			if _, err := st.CreateAccount(ctx, store.Account{Name: "acme", WebhookURL: rcv.URL}); err != nil {
				b.Fatal(err)
			}
			lock, err := st.LockLane(ctx, "local")
			if err != nil {
				b.Fatal(err)
			}
			defer lock.Release()
			for i := range b.N {
				endOneJob(b, st, lock, fmt.Sprint("k", i), []byte(`{"prompt":"p","account":"acme"}`))
			}
			snd := webhook.New(st, webhook.Config{Concurrency: 16})
			start := time.Now()
			b.ResetTimer()
			for sent := 0; sent < b.N; {
				n, err := snd.SendDue(ctx)
				if err != nil || n == 0 {
					b.Fatalf("SendDue: %d, %v after %d of %d", n, err, sent, b.N)
				}
				sent += n
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "deliveries/s")
			if left, err := st.WebhookBacklog(ctx); err != nil || left.Pending != 0 {
				b.Fatalf("backlog after sending: %+v, %v", left, err)
			}
		})
	}
}

// BenchmarkWebhookPollOrphans: one sender poll (ClaimWebhooks of 16) while
// 200,000 deliveries of an account whose URL was removed wait, due, on
// SQLite (synchronous=FULL). The first polls meet them and park them,
// 10,000 a poll (store.WebhookParked): polls-meeting-them counts those
// polls (50: still due after that many) and longest-of-those-ms is the
// slowest; every later poll is what ns/op measures, as serve's sender runs
// one a second; backlog-read-ms is what a /metrics scrape reads of them
// (store.WebhookBacklog). Before parking, every poll read all of them under the
// write lock to send none.
//
//	go test -run xxx -bench WebhookPollOrphans -benchtime 200x ./internal/bench
func BenchmarkWebhookPollOrphans(b *testing.B) {
	const orphans = 200_000
	ctx := context.Background()
	st := benchOpen(b, benchDSN(b, "sqlite"), nil)
	if _, err := st.CreateAccount(ctx, store.Account{Name: "gone"}); err != nil {
		b.Fatal(err)
	}
	const at = `'2026-12-01T00:00:00.000000Z'`
	for _, q := range []string{
		`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ` + fmt.Sprint(orphans) + `)
		INSERT INTO jobs (id, account, idempotency_key, request_hash, payload, status, created_at, finished_at, claim_turn)
		SELECT i, 'gone', 'k' || i, 'h', '{"prompt":"p"}', 'done', ` + at + `, ` + at + `, i FROM n`,
		`INSERT INTO webhook_deliveries (job_id, account, event, occurred_at, created_at, next_attempt_at)
		SELECT id, 'gone', 'job.done', ` + at + `, ` + at + `, ` + at + ` FROM jobs`,
	} {
		if _, err := st.DB().ExecContext(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	// The polls that meet them, until a poll finds none due (before
	// parking: never).
	var polls int
	var longest time.Duration
	for due := true; due && polls < 50; polls++ {
		start := time.Now()
		if cs, err := st.ClaimWebhooks(ctx, 16, time.Minute); err != nil || len(cs) != 0 {
			b.Fatalf("poll %d: %d claims, %v", polls+1, len(cs), err)
		}
		longest = max(longest, time.Since(start))
		if err := st.DB().QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM webhook_deliveries
			WHERE delivered_at IS NULL AND gave_up_at IS NULL AND next_attempt_at < '9000-01-01')`).Scan(&due); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		if cs, err := st.ClaimWebhooks(ctx, 16, time.Minute); err != nil || len(cs) != 0 {
			b.Fatalf("poll: %d claims, %v", len(cs), err)
		}
	}
	b.StopTimer()
	const scrapes = 5 // what /metrics reads of them
	start := time.Now()
	var bl store.WebhookBacklog
	for range scrapes {
		var err error
		if bl, err = st.WebhookBacklog(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/1000/scrapes, "backlog-read-ms")
	b.ReportMetric(float64(bl.Parked), "parked")
	b.ReportMetric(float64(polls), "polls-meeting-them")
	b.ReportMetric(float64(longest.Microseconds())/1000, "longest-of-those-ms")
}
