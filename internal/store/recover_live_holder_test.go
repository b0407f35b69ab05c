package store_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestRecover_DoesNotStopALiveHoldersRow (SQLite): lane local runs in
// this process (registered, heartbeating); its lock file is deleted; a
// second LockLane of local in the same process is granted (checkHolder
// reads a holder of this very pid and start time as "this process itself,
// which released its earlier hold": the flock just granted is taken as
// proof, though the file was deleted and proves nothing), and recovery
// runs under it. Step 4 now writes "dead: recovery run N ..." on the live
// holder's row, and the live lane, once it has taken its lock again, finds
// its row stopped at its next heartbeat (ECONFLICT: "lane taken over") and
// stops. A row is changed on a guess about a live process.
func TestRecover_DoesNotStopALiveHoldersRow(t *testing.T) {
	t.Parallel()
	s := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	ctx := t.Context()
	a, err := s.LockLane(ctx, "local")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Release() })
	if err := s.RegisterLane(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := s.Heartbeat(ctx, a, store.LaneBeat{Slots: 1}); err != nil {
		t.Fatalf("live lane's heartbeat: %v", err)
	}
	if err := os.Remove(a.Path); err != nil {
		t.Fatal(err)
	}
	b, err := s.LockLane(ctx, "local")
	if err != nil {
		// The refusal is the answer: this process holds the lane.
		if inkwell.ErrorCode(err) != inkwell.ELANEHELD || !strings.Contains(err.Error(), "that is this very process") {
			t.Errorf("second LockLane in the holding process = %v; want lane_held naming this very process", err)
		}
		return
	}
	rep, err := s.Recover(ctx, b, false)
	b.Release()
	if err != nil {
		t.Logf("recovery refused (sound): %v", err)
		return
	}
	t.Logf("recovery run %d ran while the holder (this process, incarnation %s) lives; evidence: %s", rep.RunID, a.Self.Incarnation, rep.Evidence.PreviousProcess)
	if rep.PreviousStopped != "" {
		t.Errorf("recovery marked the live holder's lanes row stopped: %q", rep.PreviousStopped)
	}
	if err := a.Check(); err != nil {
		t.Fatalf("live lane's Check: %v", err)
	}
	if err := s.Heartbeat(ctx, a, store.LaneBeat{Slots: 1}); err != nil {
		t.Errorf("live lane's next heartbeat = %v; want nil (a heartbeat ECONFLICT stops the lane: \"lane taken over\")", err)
	}
	rows, _ := s.Lanes(ctx)
	for _, r := range rows {
		if r.StoppedAt != nil && strings.HasPrefix(r.StopReason, "dead:") {
			t.Errorf("lanes row of live incarnation %s says %q", r.Incarnation, r.StopReason)
		}
	}
}

// TestRecover_EvidenceSaysWhyThePreviousHolderIsGone: docs/recovery.md:
// "The recovery run records the second fact too:
// evidence.previous_process says, per previous holder, why its process is
// known to be gone ... or why it could not be checked". On PostgreSQL
// recovery checks the same second fact (a previous holder alive on this
// host is refused); it once threw its findings away, leaving
// evidence.previous_process empty, so the run did not say on what it
// judged the holder gone.
//
// recoverTx on PostgreSQL discarded previousHolders' findings (only the
// flock path, provePreviousGone, kept them); they are now the evidence's
// previous_process on both dialects.
func TestRecover_EvidenceSaysWhyThePreviousHolderIsGone(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s *store.Store) {
		host, _ := os.Hostname()
		mustExec(t, s, `INSERT INTO lanes (name, incarnation, pid, host, started_at, heartbeat_at, boot_id, proc_start)
			VALUES ('local', 'old-inc', 4194000, $1, $2, $2, 'some-boot', '123')`, host, tsArg(s, time.Now()))
		rep, err := s.Recover(t.Context(), mustLockLane(t, s, "local"), false)
		if err != nil {
			t.Fatalf("Recover: %v", err)
		}
		if !strings.Contains(rep.Evidence.PreviousProcess, "4194000") {
			t.Errorf("evidence.previous_process = %q; want it to say why pid 4194000 is known to be gone (e.g. \"gone (no such process)\" or \"this host has rebooted\")", rep.Evidence.PreviousProcess)
		}
		run := mustRecoveryRun(t, s, rep.RunID)
		t.Logf("recovery run evidence: %+v", run)
	})
}
