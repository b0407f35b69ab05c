package bench

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/inkwell/inkwell/internal/api"
)

// BenchmarkBatchAccept10k: one POST /v1/batches of 10,000 lines over real
// HTTP to a fresh database (SQLite at synchronous=FULL, or PostgreSQL),
// from the first byte sent to the 201: every line read and checked, then
// 10,000 jobs and the batch row in one durable commit. Target on SQLite:
// under 1 s (docs/batches.md).
func BenchmarkBatchAccept10k(b *testing.B) {
	const lines = 10_000
	var body bytes.Buffer
	for i := 1; i <= lines; i++ {
		fmt.Fprintf(&body, `{"custom_id":"request-%d","method":"POST","url":"/v1/jobs","body":{"prompt":"a haiku about ink, number %d","max_words":20}}`+"\n", i, i)
	}
	for _, db := range []string{"sqlite", "postgres"} {
		b.Run(db, func(b *testing.B) { benchBatchAccept(b, db, lines, body.Bytes()) })
	}
}

func benchBatchAccept(b *testing.B, db string, lines int, body []byte) {
	var total, cpu time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		st := benchOpen(b, benchDSN(b, db), nil)
		srv := httptest.NewServer(api.New(api.Config{Store: st, MaxQueued: 100_000}))
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/batches", bytes.NewReader(body))
		req.Header.Set("Idempotency-Key", "bench-batch")
		req.Header.Set("Content-Type", "application/jsonl")
		b.StartTimer()
		start, cpu0 := time.Now(), processCPU()
		resp, err := srv.Client().Do(req)
		if err != nil {
			b.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		total += time.Since(start)
		cpu += processCPU() - cpu0
		b.StopTimer()
		if resp.StatusCode != http.StatusCreated {
			b.Fatalf("batch: %d %s", resp.StatusCode, out)
		}
		srv.Close()
		st.Close()
		b.StartTimer()
	}
	b.ReportMetric(total.Seconds()*1000/float64(b.N), "ms/batch")
	b.ReportMetric(float64(lines*b.N)/total.Seconds(), "lines/s")
	// CPU time of the whole process (client, server, driver) is the
	// figure a loaded machine does not inflate: on a shared machine the
	// wall time is mostly waiting for a core.
	b.ReportMetric(cpu.Seconds()*1000/float64(b.N), "cpu-ms/batch")
}
