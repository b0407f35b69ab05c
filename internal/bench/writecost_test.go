package bench

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/inkwell/inkwell/internal/store"
)

// BenchmarkJobWriteCPU: the CPU this process spends per job on its three
// writes (accept, claim, complete: one transaction each), at
// synchronous=NORMAL so that the disk's fsync does not drown it. On SQLite
// the database engine runs in this process, so this is what the kept
// counts (job_counts triggers) and the oldest-per-status indexes of
// migration 0004 add to every job; wall time on a shared machine moves
// too much to show a difference of this size.
//
//	go test -run xxx -bench JobWriteCPU -benchtime 2000x -count 6 ./internal/bench
func BenchmarkJobWriteCPU(b *testing.B) { benchJobWriteCPU(b, "") }

// BenchmarkJobWriteCPUBudget: BenchmarkJobWriteCPU for jobs of an account
// with a budget: the accept reserves (one conditional UPDATE of the
// account), the completion settles (reads the job's reservation, closes
// it, updates the account).
//
//	go test -run xxx -bench 'JobWriteCPU' -benchtime 2000x -count 6 ./internal/bench
func BenchmarkJobWriteCPUBudget(b *testing.B) { benchJobWriteCPU(b, "default") }

// benchJobWriteCPU runs the three writes of b.N jobs; with account, each
// accept reserves against it.
func benchJobWriteCPU(b *testing.B, account string) {
	ctx := context.Background()
	st, err := store.Open(ctx, benchDSN(b, "sqlite"), store.Options{Synchronous: "NORMAL"})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	lock, err := st.LockLane(ctx, "local")
	if err != nil {
		b.Fatal(err)
	}
	defer lock.Release()
	if err := st.RegisterLane(ctx, lock); err != nil {
		b.Fatal(err)
	}
	cpu0 := processCPU()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := st.Accept(ctx, store.AcceptParams{IdempotencyKey: fmt.Sprint("k", i), RequestHash: "h", Payload: []byte(`{"prompt":"p"}`),
			Account: account, ReserveMicros: 1000}); err != nil {
			b.Fatal(err)
		}
		cs, err := st.ClaimUpTo(ctx, lock, 1)
		if err != nil || len(cs) != 1 {
			b.Fatalf("claim: %v %v", cs, err)
		}
		if err := st.CompleteIfRunning(ctx, store.CompleteParams{JobID: cs[0].Job.ID, AttemptID: cs[0].Attempt.ID,
			Text: "ink", Account: "default", AmountMicros: 1, ProviderRequestID: fmt.Sprint("r", i)}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/job")
}

// processCPU is the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
