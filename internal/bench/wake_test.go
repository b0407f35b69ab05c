package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/jobwait"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// BenchmarkLongPollWake: how long after the commit that ends a job its
// long-poll (GET /v1/jobs/{id}?wait=60s) has its answer, by the path that
// wakes it (docs/client.md): this process (the hub woken after the
// commit, as the lane and the API's cancel do), another process on SQLite
// (PRAGMA data_version, looked at every 250 ms), another process on
// PostgreSQL (pg_notify at commit, LISTEN). "Another process" is a second
// store on the same database: its own connections, as a process has.
//
//	go test -run xxx -bench BenchmarkLongPollWake -benchtime 50x ./internal/bench
func BenchmarkLongPollWake(b *testing.B) {
	b.Run("sqlite/this-process", func(b *testing.B) {
		benchWake(b, filepath.Join(b.TempDir(), "inkwell.db"), true)
	})
	b.Run("sqlite/other-process", func(b *testing.B) {
		benchWake(b, filepath.Join(b.TempDir(), "inkwell.db"), false)
	})
	b.Run("postgres/other-process", func(b *testing.B) {
		benchWake(b, storetest.PostgresDSN(b), false)
	})
}

func benchWake(b *testing.B, dsn string, here bool) {
	ctx, stop := context.WithCancel(context.Background())
	server := mustStore(b, dsn)
	ender := server
	if !here {
		ender = mustStore(b, dsn)
	}
	hub := jobwait.New()
	watched := make(chan error, 1)
	go func() {
		watched <- server.WatchEnded(ctx, store.WatchParams{Wake: func(ids []int64) { hub.Wake(ids...) },
			WakeAll: hub.WakeAll, Waiting: hub.IDs})
	}()
	b.Cleanup(func() { stop(); <-watched })
	srv := httptest.NewServer(api.New(api.Config{Store: server, Waits: hub}))
	b.Cleanup(srv.Close)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		job, _, err := ender.Accept(ctx, store.AcceptParams{IdempotencyKey: fmt.Sprintf("wake-%d", i), RequestHash: "h",
			Payload: []byte(`{"prompt":"x","account":"default","max_words":50}`)})
		if err != nil {
			b.Fatal(err)
		}
		answered := make(chan time.Time, 1)
		go func() {
			resp, err := http.Get(fmt.Sprintf("%s/v1/jobs/%d?wait=60s", srv.URL, job.ID))
			if err != nil {
				b.Error(err)
			} else {
				resp.Body.Close()
			}
			answered <- time.Now()
		}()
		for hub.Waiters() == 0 {
			time.Sleep(time.Millisecond)
		}
		if _, err := ender.Cancel(ctx, job.ID, "bench"); err != nil {
			b.Fatal(err)
		}
		committed := time.Now()
		if here {
			hub.Wake(job.ID) // what the API's cancel and the lane do after their commit
		}
		lat = append(lat, (<-answered).Sub(committed))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ms-median")
	b.ReportMetric(float64(lat[len(lat)*9/10].Microseconds())/1000, "ms-p90")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "ms-max")
}
