package drill

import (
	"strings"
	"testing"
)

// TestCheck_KeptCounts: a snapshot whose kept counts (job_counts) differ
// from a full count of the rows is a violation that names the kinds; the
// triggers keep them exact through writes no Inkwell code makes.
func TestCheck_KeptCounts(t *testing.T) {
	t.Parallel()
	w := mustWorld(t)
	w.mustRun("k2", false) // one done, one running
	w.mustExec(`UPDATE jobs SET status = 'failed', error = 'worker restarted', finished_at = started_at WHERE id = 2`,
		`DELETE FROM charges WHERE job_id = 1`)
	s := w.mustSnap(KindQuiet, "after raw writes")
	for _, p := range s.Integrity {
		if strings.Contains(p, KeptCountsInvariant) {
			t.Errorf("raw writes through the triggers: %s", p)
		}
	}

	w.mustExec(`UPDATE job_counts SET n = n + 2 WHERE kind = 'done'`)
	vs := Check(w.evidence(w.mustSnap(KindFinal, "final")))
	wantViolation(t, vs, 0, InvIntegrity)
	if msg := joinViolations(vs); !strings.Contains(msg, KeptCountsInvariant+": done 3 kept, 1 counted") {
		t.Errorf("violations do not say which count is wrong:\n%s", msg)
	}
}
