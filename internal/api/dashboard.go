package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/web"
)

// The dashboard is server-rendered HTML (html/template over web.FS) that
// reads only through the store's operator queries: the same views an
// operator reads in sqlite3 or psql. A few lines of JavaScript refresh it,
// send retries to POST /v1/jobs/{id}/retry and cancels (a Cancel button on
// each queued and running job) to POST /v1/jobs/{id}/cancel.

// operatorStore is what the dashboard, /v1/overview and /metrics read.
type operatorStore interface {
	Overview(ctx context.Context) ([]store.OverviewRow, error)
	Board(ctx context.Context, limit int, statuses ...string) ([]store.BoardRow, error)
	BoardRowByID(ctx context.Context, id int64) (*store.BoardRow, error)
	LiveLanes(ctx context.Context) ([]store.LaneState, error)
	LastRecoveryRun(ctx context.Context) (*store.RecoveryRun, error)
	RecoveryRunByID(ctx context.Context, id int64) (store.RecoveryRun, error)
}

// Rows shown per dashboard table; the counts above them are always whole.
const (
	dashboardFailedRows = 100
	dashboardActiveRows = 50
)

// refreshSeconds is how often the dashboard reloads its numbers.
const refreshSeconds = 5

type pages struct{ t *template.Template }

func mustParsePages() pages {
	t, err := template.New("").Funcs(pageFuncs).ParseFS(web.FS, "templates/*.html")
	if err != nil {
		panic(fmt.Sprintf("api: dashboard templates: %v", err))
	}
	return pages{t: t}
}

func staticHandler() http.Handler {
	sub, err := fs.Sub(web.FS, "static")
	if err != nil {
		panic(fmt.Sprintf("api: dashboard static files: %v", err))
	}
	return http.StripPrefix("/static/", http.FileServerFS(sub))
}

// dashboardData is what the / page shows.
type dashboardData struct {
	Title      string
	Now        time.Time
	Ready      bool
	Refresh    int
	Overview   []store.OverviewRow
	Lanes      []store.LaneState
	LiveLanes  int
	Recovery   *store.RecoveryRun
	Evidence   *store.Evidence
	Failed     []store.BoardRow
	FailedMore int64
	Active     []store.BoardRow
	ActiveMore int64
	Session    *sessionView // signed in: the token and the CSRF token for the page's POSTs
}

// sessionView is what a page shows of its dashboard session (session.go).
type sessionView struct {
	TokenID string
	CSRF    string
}

func viewOf(se *session) *sessionView {
	if se == nil {
		return nil
	}
	return &sessionView{TokenID: se.tokenID, CSRF: se.csrf}
}

// handleDashboard is GET /: counts by status with the next safe action,
// lanes, the last recovery run, failed jobs with their class and a retry
// button, and the jobs in flight with a cancel button.
func (s *Server) handleDashboard(w http.ResponseWriter, r *http.Request) {
	d, err := s.dashboard(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	d.Session = viewOf(sessionOf(r.Context()))
	s.render(w, r, "dashboard.html", d)
}

func (s *Server) dashboard(ctx context.Context) (dashboardData, error) {
	d := dashboardData{Title: "Inkwell", Now: time.Now().UTC(), Ready: s.ready.Load(), Refresh: refreshSeconds}
	var err error
	if d.Overview, err = s.cfg.Store.Overview(ctx); err != nil {
		return d, err
	}
	if d.Lanes, err = s.cfg.Store.LiveLanes(ctx); err != nil {
		return d, err
	}
	for _, l := range d.Lanes {
		if l.Alive {
			d.LiveLanes++
		}
	}
	if d.Recovery, err = s.cfg.Store.LastRecoveryRun(ctx); err != nil {
		return d, err
	}
	d.Evidence = parseEvidence(d.Recovery)
	if d.Failed, err = s.cfg.Store.Board(ctx, dashboardFailedRows, inkwell.StatusFailed); err != nil {
		return d, err
	}
	if d.Active, err = s.cfg.Store.Board(ctx, dashboardActiveRows, inkwell.StatusRunning, inkwell.StatusQueued); err != nil {
		return d, err
	}
	counts := map[string]int64{}
	for _, o := range d.Overview {
		counts[o.Status] = o.Jobs
	}
	d.FailedMore = counts[inkwell.StatusFailed] - int64(len(d.Failed))
	d.ActiveMore = counts[inkwell.StatusRunning] + counts[inkwell.StatusQueued] - int64(len(d.Active))
	return d, nil
}

// jobData is what the /jobs/{id} page shows.
type jobData struct {
	Title    string
	Now      time.Time
	Refresh  int
	Detail   inkwell.JobDetail
	Request  inkwell.Request
	Board    *store.BoardRow
	Timeline []timelineEntry
	Session  *sessionView
}

// handleJobPage is GET /jobs/{id}: one job's timeline.
func (s *Server) handleJobPage(w http.ResponseWriter, r *http.Request) {
	id, err := jobID(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	d := jobData{Title: fmt.Sprintf("job %d · Inkwell", id), Now: time.Now().UTC(), Refresh: refreshSeconds, Session: viewOf(sessionOf(ctx))}
	if d.Detail, err = s.cfg.Store.Show(ctx, id); err != nil {
		s.writeError(w, r, err)
		return
	}
	_ = json.Unmarshal(d.Detail.Job.Payload, &d.Request) // shown raw when unreadable
	if d.Board, err = s.cfg.Store.BoardRowByID(ctx, id); err != nil {
		s.writeError(w, r, err)
		return
	}
	runs := map[int64]*store.RecoveryRun{}
	for _, a := range d.Detail.Attempts {
		if a.RecoveryRunID == nil || runs[*a.RecoveryRunID] != nil {
			continue
		}
		run, err := s.cfg.Store.RecoveryRunByID(ctx, *a.RecoveryRunID)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		runs[run.ID] = &run
	}
	d.Timeline = timeline(d.Detail, runs)
	s.render(w, r, "job.html", d)
}

// handleOverview is GET /v1/overview: job_overview, the lanes and the last
// recovery run, as JSON.
func (s *Server) handleOverview(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ov, err := s.cfg.Store.Overview(ctx)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	lanes, err := s.cfg.Store.LiveLanes(ctx)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	run, err := s.cfg.Store.LastRecoveryRun(ctx)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, NewOverviewResponse(ov, lanes, run))
}

// render executes a page into a buffer first, so a template error becomes
// a clean 500 rather than half a page.
func (s *Server) render(w http.ResponseWriter, r *http.Request, name string, data any) {
	var buf bytes.Buffer
	if err := s.pages.t.ExecuteTemplate(&buf, name, data); err != nil {
		s.writeError(w, r, fmt.Errorf("render %s: %w", name, err))
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = buf.WriteTo(w)
}

func parseEvidence(run *store.RecoveryRun) *store.Evidence {
	if run == nil {
		return nil
	}
	var ev store.Evidence
	if json.Unmarshal([]byte(run.Evidence), &ev) != nil {
		return nil
	}
	return &ev
}

// actionClass grades a next action for colour: what needs a person now,
// what needs a look, what is moving, and what needs nothing.
func actionClass(action string) string {
	switch {
	case strings.HasPrefix(action, "not moving"), strings.HasPrefix(action, "no live"), strings.HasPrefix(action, "restart"),
		strings.HasPrefix(action, "possible poison"):
		return "act-bad"
	case strings.HasPrefix(action, "inspect"), strings.HasPrefix(action, "fix"), strings.HasPrefix(action, "check"),
		strings.HasPrefix(action, "gave up"):
		return "act-warn"
	case strings.HasPrefix(action, "wait"), strings.HasPrefix(action, "safe to retry"):
		return "act-ok"
	}
	return "act-none"
}

var pageFuncs = template.FuncMap{
	"actionClass": actionClass,
	"clock": func(t *time.Time) string {
		if t == nil || t.IsZero() {
			return "–"
		}
		return inkwell.FormatTime(*t)
	},
	"ago": func(now time.Time, t *time.Time) string {
		if t == nil || t.IsZero() {
			return "–"
		}
		return shortDuration(now.Sub(*t)) + " ago"
	},
	// stamp prints a time with its age.
	"stamp": func(now, t time.Time) string {
		return inkwell.FormatTime(t) + " · " + shortDuration(now.Sub(t)) + " ago"
	},
	"money": func(micros int64) string { return fmt.Sprintf("%d.%06d", micros/1_000_000, micros%1_000_000) },
	"tp":    func(t time.Time) *time.Time { return &t },
	"deref": func(p *int64) int64 {
		if p == nil {
			return 0
		}
		return *p
	},
}

// shortDuration prints d like the views print ages: 42s, 3m07s, 2h05m, 4d03h.
func shortDuration(d time.Duration) string {
	s := int64(d.Round(time.Second) / time.Second)
	if s < 0 {
		s = 0
	}
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	case s < 86400:
		return fmt.Sprintf("%dh%02dm", s/3600, s%3600/60)
	}
	return fmt.Sprintf("%dd%02dh", s/86400, s%86400/3600)
}
