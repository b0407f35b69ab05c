package worker

import (
	"context"
	"encoding/json"
	"time"

	"github.com/inkwell/inkwell"
)

// Rescue on proof, PostgreSQL only. Lanes share one database, so a lane
// that dies for good would leave its running attempts running forever: its
// own startup recovery never comes. Every running lane therefore watches
// the lanes that still own running attempts, and when one's lock can be
// taken, its holder's session is provably gone: the rescuer takes the lock,
// closes that lane's orphans exactly as its startup recovery would (a
// recovery_runs row names the dead lane, the rescuer and the proof), and
// lets go. A live lane holds its lock however long its provider call takes,
// so no timeout ever fails a running job; the call's own timeout governs it.

// rescue looks every cfg.Rescue until ctx ends.
func (l *Lane) rescue(ctx context.Context) {
	everyTick(ctx, l.cfg.Rescue, func(ctx context.Context) {
		l.rescueOnce(ctx)
		l.rescueScans.Add(1)
	})
}

// everyTick calls fn at each tick of a ticker of period d until ctx ends;
// the first call comes after d.
func everyTick(ctx context.Context, d time.Duration, fn func(context.Context)) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fn(ctx)
	}
}

// rescueOnce closes the orphans of every other lane proven dead right now.
func (l *Lane) rescueOnce(ctx context.Context) {
	if l.lock.Check() != nil {
		return // a lane that lost its own lock proves nothing for others
	}
	dctx, cancel := context.WithTimeout(ctx, l.cfg.DBTimeout)
	defer cancel()
	lanes, err := l.store.LanesWithRunning(dctx, l.cfg.Name)
	if err != nil {
		if ctx.Err() == nil {
			l.log.WarnContext(ctx, "rescue: list lanes with running attempts", "err", err)
		}
		return
	}
	for _, dead := range lanes {
		if ctx.Err() != nil {
			return
		}
		l.rescueLane(dctx, dead)
	}
}

// rescueLane takes dead's lock if it can, closes its orphans, and lets go.
func (l *Lane) rescueLane(ctx context.Context, dead string) {
	lock, err := l.store.LockLaneForRescue(ctx, dead, l.lock)
	switch {
	case inkwell.ErrorCode(err) == inkwell.ELANEHELD:
		return // alive: its running jobs are its own, however long they take
	case err != nil:
		if ctx.Err() == nil {
			l.log.WarnContext(ctx, "rescue: take dead lane's lock", "dead_lane", dead, "err", err)
		}
		return
	case lock == nil:
		return // another lane rescued it first
	}
	defer lock.Release()
	rep, err := l.store.Rescue(ctx, lock)
	switch {
	case inkwell.ErrorCode(err) == inkwell.ELANEHELD:
		// Its session ended but its process runs on this host, storing its
		// answers (pgLock.takenFromLive): not dead, and no fault of ours;
		// it says so at every look, so only at debug.
		l.log.DebugContext(ctx, "rescue: the lane's session ended but its process lives; left alone", "dead_lane", dead, "err", err)
		return
	case err != nil:
		l.log.ErrorContext(ctx, "rescue: close dead lane's orphans", "dead_lane", dead, "err", err)
		return
	}
	ev, _ := json.Marshal(rep.Evidence)
	l.log.WarnContext(ctx, "rescued a dead lane's orphans on proof", "dead_lane", dead, "recovery_run_id", rep.RunID,
		"attempts_closed", rep.AttemptsClosed, "jobs_failed", rep.JobsFailed, "evidence", string(ev))
	for _, a := range rep.Anomalies {
		l.log.WarnContext(ctx, "invariant break left unchanged", "dead_lane", dead, "recovery_run_id", rep.RunID, "anomaly", a)
	}
}
