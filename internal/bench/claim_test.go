package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// Fair claims (docs/scaling.md#fair-claims-across-accounts): the claim
// alone, and a lane's drain, with the queue spread over 1, 10 or 100
// accounts. b.N is the number of claims (BenchmarkClaim) or of jobs
// (BenchmarkDrainAccounts):
//
//	go test -run xxx -bench BenchmarkClaim -benchtime 2000x ./internal/bench
//	go test -run xxx -bench BenchmarkDrainAccounts -benchtime 10000x ./internal/bench

// BenchmarkClaim times b.N calls of ClaimUpTo(n) alone on a queue of
// b.N × n jobs spread evenly over the accounts; claims/s and jobs/s.
func BenchmarkClaim(b *testing.B) {
	for _, db := range []string{"sqlite", "postgres"} {
		for _, accounts := range []int{1, 10, 100} {
			for _, n := range []int{1, 16} {
				b.Run(fmt.Sprintf("%s/accounts=%d/n=%d", db, accounts, n), func(b *testing.B) {
					benchClaim(b, benchDSN(b, db), accounts, n, queueAccounts)
				})
			}
		}
		// The same 100 accounts with their jobs arriving in turn (one of
		// each, then the next of each): neighbouring ids belong to
		// different accounts, as when many accounts send at once. In the
		// blocks above a fair claim of 16 touches 16 distinct pages of the
		// table and its indexes where the oldest-first claim touched one
		// or two; here both touch the same few.
		for _, n := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/accounts=100-mixed/n=%d", db, n), func(b *testing.B) {
				benchClaim(b, benchDSN(b, db), 100, n, queueAccountsMixed)
			})
		}
		// One account whose jobs are claimed in the order the 100
		// accounts' blocks above are (turn t: the t-th job of each block):
		// the same rows, so the same pages, in the same order, with no
		// second account. What this case and accounts=100 share is the
		// cost of claiming rows that sit far apart; what they do not is
		// the cost of fairness across accounts.
		for _, n := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/accounts=1-strided/n=%d", db, n), func(b *testing.B) {
				benchClaim(b, benchDSN(b, db), 100, n, queueOneStrided)
			})
		}
	}
}

func benchClaim(b *testing.B, dsn string, accounts, n int, queue func(*testing.B, *store.Store, int, int)) {
	ctx := context.Background()
	st := benchOpen(b, dsn, nil)
	queue(b, st, b.N*n, accounts)
	l, err := st.LockLane(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Release()
	runtime.GC()
	written := writeMeter(b, st)
	b.ResetTimer()
	start := time.Now()
	claimed := 0
	for range b.N {
		cs, err := st.ClaimUpTo(ctx, l, n)
		if err != nil {
			b.Fatal(err)
		}
		claimed += len(cs)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if claimed != b.N*n {
		b.Fatalf("claimed %d jobs, want %d", claimed, b.N*n)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "claims/s")
	b.ReportMetric(float64(claimed)/elapsed.Seconds(), "jobs/s")
	if bytes, unit, ok := written(); ok {
		b.ReportMetric(float64(bytes)/float64(b.N), unit)
	}
}

// writeMeter starts counting what the claims write, a figure that the
// machine's CPU load does not move as it moves the timings. On SQLite it
// is the bytes this process hands to write(2) and pwrite(2), WAL frames
// and checkpoints both (/proc/self/io wchar; Linux only): the same from
// run to run. On PostgreSQL it is the server's WAL
// (pg_current_wal_insert_lsn), which counts everything the server writes
// meanwhile: autovacuum of the jobs just loaded, full-page images after a
// checkpoint, and any other client's work, so it is the claim's only on
// a server nothing else is using, and worth reading only when runs agree.
// The returned func reads the count since the start.
func writeMeter(b *testing.B, st *store.Store) func() (int64, string, bool) {
	ctx := context.Background()
	if st.Dialect() == "postgres" {
		var start string
		if err := st.WriteDB().QueryRowContext(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&start); err != nil {
			b.Fatal(err)
		}
		return func() (int64, string, bool) {
			var n int64
			if err := st.WriteDB().QueryRowContext(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn)::bigint`, start).Scan(&n); err != nil {
				b.Fatal(err)
			}
			return n, "WAL-B/claim", true
		}
	}
	start, ok := processWritten()
	return func() (int64, string, bool) {
		end, ok2 := processWritten()
		return end - start, "written-B/claim", ok && ok2
	}
}

// processWritten is /proc/self/io's wchar: the bytes this process has
// passed to write calls.
func processWritten() (int64, bool) {
	raw, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "wchar: "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// BenchmarkDrainAccounts is BenchmarkLaneConcurrency's instant-provider
// drain (one lane, SQLite at synchronous=FULL) with the queue spread over
// 1 or 100 accounts: what fair claims cost a lane end to end.
func BenchmarkDrainAccounts(b *testing.B) {
	for _, accounts := range []int{1, 100} {
		for _, slots := range []int{1, 16} {
			b.Run(fmt.Sprintf("accounts=%d/slots=%d", accounts, slots), func(b *testing.B) {
				st := mustStore(b, filepath.Join(b.TempDir(), "bench.db"))
				queueAccounts(b, st, b.N, accounts)
				drainQueued(b, st, 0, slots)
			})
		}
	}
}

// queueAccounts queues total jobs over the accounts acct-0 … acct-(n-1),
// evenly, one block of ids per account (acct-0's oldest): a flood from
// one account after another, the order that starves the later accounts
// under a claim that takes the oldest job first.
func queueAccounts(b *testing.B, st *store.Store, total, accounts int) {
	b.Helper()
	for a := range accounts {
		k := total / accounts
		if a < total%accounts {
			k++
		}
		if k > 0 {
			storetest.MustQueue(b, st, fmt.Sprintf("acct-%d", a), fmt.Sprintf("q%d", a), k)
		}
	}
}

// queueAccountsMixed queues total jobs over the accounts acct-0 …
// acct-(n-1) in turn: one job of each, then the next of each.
func queueAccountsMixed(b *testing.B, st *store.Store, total, accounts int) {
	b.Helper()
	for i := range total {
		a := i % accounts
		storetest.MustQueue(b, st, fmt.Sprintf("acct-%d", a), fmt.Sprintf("q%d-%d", a, i), 1)
	}
}

// queueOneStrided queues total jobs for one account, then gives job i of
// block k (blocks of total/blocks ids, as queueAccounts lays out blocks
// accounts) the turn i: a claim takes the i-th job of every block in
// turn, as the fair claim does over queueAccounts' blocks.
func queueOneStrided(b *testing.B, st *store.Store, total, blocks int) {
	b.Helper()
	storetest.MustQueue(b, st, "acct-0", "q", total)
	size := max(total/blocks, 1)
	q := `UPDATE jobs SET claim_turn = (id - (SELECT MIN(id) FROM jobs)) % ?1`
	if st.Dialect() == "postgres" {
		q = strings.ReplaceAll(q, "?1", "$1")
	}
	if _, err := st.WriteDB().Exec(q, size); err != nil {
		b.Fatal(err)
	}
}
