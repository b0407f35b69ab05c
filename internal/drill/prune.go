package drill

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/inkwell/inkwell"
)

// pruneAndResend ends a job-life scenario with retention (docs/design.md §9):
// once every job is finished and serve stopped, `inkwell prune
// --older-than 0s` removes the prompt and text of every finished job; the
// drill reads the database, starts serve again, re-sends every key as a
// client that lost its answers would, lets the lane poll a few times,
// stops serve and reads again. The checker then holds that each pruned
// job kept its key, hash, status, attempts and charge, that the re-sends
// were answered 200 with the pruned job, and that no job ran again
// (InvPruned, InvPrunedNotRerun).
func (p *play) pruneAndResend(ctx context.Context) error {
	logPath := filepath.Join(p.d.work, p.slug+".prune.log")
	pr, err := startChild("prune", p.d.cfg.Bin, []string{"prune", "--older-than", "0s", "--db", p.dsn}, childEnv(""), logPath)
	if err != nil {
		return err
	}
	p.ps.add(pr)
	if err := pr.waitExit(ctx, p.d.lim.stop); err != nil {
		pr.kill()
		return fmt.Errorf("inkwell prune: %w", err)
	}
	if !pr.state.Success() {
		return fmt.Errorf("inkwell prune --older-than 0s exited with %s; last lines:\n%s", pr.exitText(), pr.tailText())
	}
	p.event("`inkwell prune --older-than 0s` removed the prompt and text of every finished job", fmt.Sprintf("pid %d", pr.pid()))
	idx, err := p.snap(ctx, KindQuiet, "after prune")
	if err != nil {
		return err
	}
	p.tl.Pruned = idx
	sv, err := p.startServe(ctx, "", false)
	if err != nil {
		return err
	}
	if _, err := p.awaitReady(ctx, sv, false); err != nil {
		return err
	}
	if err := p.snapRecovered(ctx, sv); err != nil {
		return err
	}
	resent := 0
	for _, c := range p.clients {
		c.mu.Lock()
		items := append([]item(nil), c.items...)
		c.mu.Unlock()
		for _, it := range items {
			if it.jobID == 0 {
				continue
			}
			if err := p.resendPruned(ctx, sv.url, it); err != nil {
				return err
			}
			resent++
		}
	}
	p.event(fmt.Sprintf("every key re-sent to serve#%d (%d request(s)) after the prune", p.starts, resent), "")
	// Give the lane a few polls (--poll 100ms) to claim what it should not.
	if err := sleep(ctx, 300*time.Millisecond); err != nil {
		return err
	}
	if err := p.stopServe(sv); err != nil {
		return err
	}
	_, err = p.snap(ctx, KindFinal, "final, after prune and re-sends")
	return err
}

// resendPruned re-sends the item's request under its key until an answer
// comes, and logs it as a re-send after the prune.
func (p *play) resendPruned(ctx context.Context, base string, it item) error {
	body := it.body()
	c := &client{name: "resend", http: newHTTPClient(), srv: &p.srv, log: &p.log}
	b := backoff{}
	for range 50 {
		var d inkwell.JobDetail
		s := c.post(ctx, base, pathJobs, it.key, body, &d)
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		s.Key, s.AfterPrune = it.key, true
		if s.Outcome == OutcomeOK {
			s.JobID, s.Pruned = d.Job.ID, d.Job.PrunedAt != nil
		}
		p.log.add(s)
		if s.Outcome == OutcomeOK || (s.Outcome == OutcomeRefused && permanent(s.Status)) {
			return nil
		}
		if err := b.wait(ctx); err != nil {
			return err
		}
	}
	return fmt.Errorf("re-send of pruned key %s: no answer after 50 tries", it.key)
}

// pruneNote says, for the report, what the reads around the prune showed:
// the final read before it, the read right after it, and the read after
// the re-sends; "" when the scenario had no prune.
func (t *Timeline) pruneNote() string {
	if t.Pruned < 0 || t.Final < 0 || t.Pruned >= len(t.Snaps) {
		return ""
	}
	before, after, last := t.Snaps[t.Final], t.Snaps[t.Pruned], t.lastSnap()
	pruned, withText := 0, 0
	for _, j := range after.Jobs {
		if isPruned(j) {
			pruned++
		}
	}
	for _, r := range after.Results {
		if r.Text != "" {
			withText++
		}
	}
	c0, b0, _ := t.billsOf(before)
	c1, b1, _ := t.billsOf(last)
	var resent, answered200 int
	for _, s := range t.Requests {
		if s.AfterPrune {
			resent++
			if s.Status == 200 && s.Pruned {
				answered200++
			}
		}
	}
	return fmt.Sprintf("**After the prune** (`inkwell prune --older-than 0s`, then every key re-sent to a restarted serve): "+
		"%d of %d job(s) pruned, %d result(s) still holding text; attempts %d before and %d after, charges %d and %d; "+
		"%d re-send(s), %d answered 200 with the pruned job; attempts after the re-sends %d; provider calls / bills %d / %d before the prune, %d / %d at the end.",
		pruned, len(after.Jobs), withText, len(before.Attempts), len(after.Attempts), len(before.Charges), len(after.Charges),
		resent, answered200, len(last.Attempts), c0, b0, c1, b1)
}
