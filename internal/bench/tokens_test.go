package bench

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

// BenchmarkVerifyToken: what a guess costs the server, with a wrong secret
// for a token id that exists against a secret for an id that does not
// (docs/security.md, "Tokens"). b.N is the number of pairs; the two kinds
// alternate, so that a drift in the machine's load falls on both, and
// each call is timed alone. It reports each kind's median and 90th
// percentile, and the difference of the medians:
//
//	go test -run xxx -bench BenchmarkVerifyToken -benchtime 20000x ./internal/bench
func BenchmarkVerifyToken(b *testing.B) {
	for _, db := range []string{"sqlite", "postgres"} {
		b.Run(db, func(b *testing.B) {
			ctx := context.Background()
			st := benchOpen(b, benchDSN(b, db), nil)
			tok, text, err := st.CreateToken(ctx, inkwell.DefaultAccount, store.RoleClient)
			if err != nil {
				b.Fatal(err)
			}
			secret := strings.TrimPrefix(text, "ink_"+tok.ID+"_")
			guesses := [2]string{
				"ink_" + tok.ID + "_" + strings.Repeat("a", len(secret)), // the id exists, the secret is wrong
				"ink_ffffffffffffffff_" + secret,                         // no such id
			}
			var took [2][]time.Duration
			b.ResetTimer()
			for i := range b.N {
				for k, g := range guesses {
					if i%2 == 1 {
						k, g = 1-k, guesses[1-k] // each kind goes first half the time
					}
					start := time.Now()
					_, err := st.VerifyToken(ctx, g)
					took[k] = append(took[k], time.Since(start))
					if inkwell.ErrorCode(err) != inkwell.EUNAUTHENTICATED {
						b.Fatalf("guess %d: %v, want unauthenticated", k, err)
					}
				}
			}
			b.StopTimer()
			med := func(d []time.Duration, q float64) float64 {
				slices.Sort(d)
				return float64(d[int(q*float64(len(d)-1))].Nanoseconds())
			}
			b.ReportMetric(med(took[0], 0.5), "wrong-secret-p50-ns")
			b.ReportMetric(med(took[1], 0.5), "unknown-id-p50-ns")
			b.ReportMetric(med(took[0], 0.9), "wrong-secret-p90-ns")
			b.ReportMetric(med(took[1], 0.9), "unknown-id-p90-ns")
			b.ReportMetric(med(took[0], 0.5)-med(took[1], 0.5), "p50-diff-ns")
		})
	}
}
