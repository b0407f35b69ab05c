package drill

import "github.com/inkwell/inkwell"

// final checks the end of a scenario: every job done, and the database
// agrees with everything the clients were told.
func (c *checker) final(e Evidence) {
	for _, j := range c.snap.Jobs {
		// A cancelled job ends cancelled; InvCancelAsked says whether a
		// client asked for it.
		if j.Status != inkwell.StatusDone && !isCancelled(j) {
			c.add(j.ID, InvAllDone, "job is %s at the end (error %q)", j.Status, j.Error.String)
		}
	}
	for _, key := range e.Keys {
		c.answers(key, e.Requests)
		j, ok := c.snap.jobByKey(key)
		text, read := e.Texts[key]
		if !ok || !read || isPruned(j) {
			continue
		}
		for _, r := range c.snap.resultsOf(j.ID) {
			if r.Text != text {
				c.add(j.ID, InvBilledText, "the client read %q, the database holds %q", clip(text), clip(r.Text))
			}
		}
	}
}

// answers checks what the server told the clients about key against the
// database: every "ok" named the one job of that key, and a key whose
// every request was certainly refused has no row.
func (c *checker) answers(key string, sent []Sent) {
	j, exists := c.snap.jobByKey(key)
	var ok, unknown int
	for _, s := range sent {
		if s.Key != key || s.Path != pathJobs {
			continue
		}
		switch s.Outcome {
		case OutcomeOK:
			ok++
			if !exists {
				c.add(s.JobID, InvOneJobPerKey, "request #%d with key %q was answered with job %d, but the database has no job for that key", s.Seq, key, s.JobID)
			} else if s.JobID != j.ID {
				c.add(j.ID, InvOneJobPerKey, "request #%d with key %q was answered with job %d, but the database holds job %d for it", s.Seq, key, s.JobID, j.ID)
			}
		case OutcomeUnknown:
			unknown++
		}
	}
	if exists && ok == 0 && unknown == 0 {
		c.add(j.ID, InvNoRowForRefused, "every request with key %q was refused, yet the database holds job %d for it", key, j.ID)
	}
}
