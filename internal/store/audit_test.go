package store_test

import (
	"strings"
	"testing"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestStore_AuditLog: retry, cancel and prune each write one audit_log row
// per job, naming who and the job, in the action's own transaction; a
// refused action writes none (nor anything else); rows never change.
func TestStore_AuditLog(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		failed := mustAccept(t, s, store.AcceptParams{IdempotencyKey: "failed", RequestHash: "h", Payload: []byte(`{"prompt":"p"}`)})
		mustFailClass(t, s, mustClaim(t, s, "east"), "provider: boom", inkwell.ClassProviderError)
		queued := mustAccept(t, s, store.AcceptParams{IdempotencyKey: "queued", RequestHash: "h", Payload: []byte(`{"prompt":"p"}`)})

		if _, err := s.RetryIfFailed(t.Context(), failed.ID, store.ActorToken("t1")); err != nil {
			t.Fatalf("retry: %v", err)
		}
		if _, err := s.Cancel(t.Context(), queued.ID, store.ActorCLI); err != nil {
			t.Fatalf("cancel: %v", err)
		}

		// Refusals write nothing: a retry of a queued job, a cancel of a
		// job cancelled already (answered as it is), a retry of no job.
		before := dumpAll(t, s)
		if _, err := s.RetryIfFailed(t.Context(), failed.ID, store.ActorCLI); inkwell.ErrorCode(err) != inkwell.ECONFLICT {
			t.Errorf("retry of a queued job: %v, want %s", err, inkwell.ECONFLICT)
		}
		if _, err := s.Cancel(t.Context(), queued.ID, store.ActorCLI); err != nil {
			t.Errorf("cancel again: %v, want the job as it is", err)
		}
		if _, err := s.RetryIfFailed(t.Context(), 999, store.ActorCLI); inkwell.ErrorCode(err) != inkwell.ENOTFOUND {
			t.Errorf("retry of no job: %v, want %s", err, inkwell.ENOTFOUND)
		}
		assertSameDump(t, before, dumpAll(t, s))

		// Prune takes the cancelled job (finished), not the queued one.
		if _, err := s.PruneOlderThan(t.Context(), 0, store.PruneOptions{Pause: -1, By: store.ActorRetention}); err != nil {
			t.Fatalf("prune: %v", err)
		}

		got, err := s.AuditLog(t.Context(), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := []struct {
			actor, action string
			job           int64
			detail        string
		}{
			{store.ActorRetention, store.AuditPrune, queued.ID, ""},
			{store.ActorCLI, store.AuditCancel, queued.ID, "was queued"},
			{"token t1", store.AuditRetry, failed.ID, "was failed, class provider_error: provider: boom"},
		}
		if len(got) != len(want) {
			t.Fatalf("audit_log = %+v, want %d rows", got, len(want))
		}
		for i, w := range want {
			g := got[i]
			if g.Actor != w.actor || g.Action != w.action || g.JobID != w.job || !strings.HasPrefix(g.Detail, w.detail) || g.At.IsZero() {
				t.Errorf("audit row %d = %+v, want %s %s job %d %q…", i, g, w.actor, w.action, w.job, w.detail)
			}
		}
		one, err := s.AuditLog(t.Context(), failed.ID, 0)
		if err != nil || len(one) != 1 || one[0].Action != store.AuditRetry {
			t.Errorf("audit of job %d = %+v, %v; want its one retry", failed.ID, one, err)
		}
		if last, err := s.AuditLog(t.Context(), 0, 1); err != nil || len(last) != 1 || last[0].Action != store.AuditPrune {
			t.Errorf("audit limit 1 = %+v, %v; want the newest row only", last, err)
		}

		// Append-only.
		for _, q := range []string{`UPDATE audit_log SET actor = 'someone else'`, `DELETE FROM audit_log`} {
			if _, err := s.WriteDB().ExecContext(t.Context(), q); err == nil {
				t.Errorf("%s: allowed; want audit_log rows never changed", q)
			}
		}
	})
}
