package bench

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/inkwell/inkwell/internal/api"
)

// BenchmarkBatchAccept10k: one POST /v1/batches of 10,000 lines over real
// HTTP to a fresh SQLite file at synchronous=FULL, from the first byte sent
// to the 201: every line read and checked, then 10,000 jobs and the batch
// row in one durable commit. Target: under 1 s (docs/batches.md).
func BenchmarkBatchAccept10k(b *testing.B) {
	const lines = 10_000
	var body bytes.Buffer
	for i := 1; i <= lines; i++ {
		fmt.Fprintf(&body, `{"custom_id":"request-%d","method":"POST","url":"/v1/jobs","body":{"prompt":"a haiku about ink, number %d","max_words":20}}`+"\n", i, i)
	}
	var total time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		st := mustStore(b, filepath.Join(b.TempDir(), fmt.Sprintf("batch-%d.db", i)))
		srv := httptest.NewServer(api.New(api.Config{Store: st, MaxQueued: 100_000}))
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/batches", bytes.NewReader(body.Bytes()))
		req.Header.Set("Idempotency-Key", "bench-batch")
		req.Header.Set("Content-Type", "application/jsonl")
		b.StartTimer()
		start := time.Now()
		resp, err := srv.Client().Do(req)
		if err != nil {
			b.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		total += time.Since(start)
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
}
