package drill

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/crashpoint"
	"github.com/inkwell/inkwell/internal/store"
)

// Timeline is what happened in one scenario and what the checker found.
type Timeline struct {
	Name  string // "claim.after-commit", "claim.after-commit:3", "random run 2"
	Point string // the crash point, "" in random mode
	Hit   int
	About string
	Seed  int64 // random mode: the run's seed
	Plan  []string

	Events     []Event
	Snaps      []Snapshot
	Requests   []Sent
	Gets       int64
	Keys       []string
	Texts      map[string]string
	DeadPIDs   []int
	Violations []Violation
	Err        error // the scenario could not be played to its end
	Took       time.Duration
	// InFlight is, in the in-flight family, how many calls serve held in
	// flight (its --concurrency); Trigger the key of the job the family
	// adds after them ("" when none). See inflight.go.
	InFlight int
	Trigger  string
	// Budget is the account's budget when the scenario gave it one that
	// binds (inflight_budget.go), 0 otherwise; OverBudget the keys sent
	// past it, each to be refused 402.
	Budget     int64
	OverBudget []string
	// Claude are the keys whose request was the chat form on drill-claude,
	// whose provider honours no idempotency key (models.go).
	Claude []string
	// Running is, in the in-flight family and random mode, the attempts
	// running at each crash read: the calls in flight when serve died,
	// and claims whose call had not started.
	Running []int
	// Crash, Recovered and Final index Snaps for the report's three
	// columns: after the crash, after the restart's recovery, at the end.
	// -1 when there is none.
	Crash, Recovered, Final int
	// Family is the job-life family ("reschedule", "cancel"; joblife.go),
	// "" otherwise. Expect, when not nil, lists the paths its three reads
	// may take (in place of the point's own), and Why says why there are
	// several.
	Family string
	Expect []path
	Why    string
	// Pruned is, when the scenario ended with a prune (prune.go), the
	// index in Snaps of the read right after it; -1 otherwise.
	Pruned int
}

// Event is one step of a timeline. What is stable from run to run and
// goes in the Markdown report; Extra (pids, times) only to the terminal.
type Event struct{ What, Extra string }

// Failed reports whether the scenario broke an invariant or did not finish.
func (t *Timeline) Failed() bool { return t.Err != nil || len(t.Violations) > 0 }

// play is one scenario being played: its database, its serve children,
// its clients and what they saw.
type play struct {
	d    *drill
	tl   *Timeline
	slug string
	dsn  string
	ps   procs
	srv  target
	log  requestLog

	good, failing   *sim
	providerTimeout time.Duration
	serveArgs       []string // more flags for every serve of the scenario
	// front, when not nil, stands between serve and the good simulator
	// (front.go); maxAttempts is serve's --max-attempts (0 for 1).
	front       *front
	maxAttempts int
	// own is the scenario's own simulator (runSpec.latency), restarted on
	// the same ledger when a run wants another latency.
	own        *sim
	ownLatency time.Duration
	ownStarts  int
	// gate holds the requests meant for a later serve (item.gate); it is
	// opened once a run with openGate is ready.
	gate              chan struct{}
	openGateWhenReady bool
	holdEach          bool     // the clients wait for each job's claim (client.holdEach)
	budget            int64    // the accounts' budget (0: DrillBudgetMicros)
	webhookAccounts   []string // accounts given a webhook (webhooks.go; nil: "drill")

	retry           atomic.Bool
	retryAfterReady bool // the run's retry setting, applied once it is ready
	clients         []*client
	clientsDone     chan struct{}
	cancelClients   context.CancelFunc
	clientErr       error

	starts int
	ended  bool      // a serve has died or stopped: the next one recovers
	began  time.Time // for the times of events in the terminal
}

func (d *drill) newPlay(name, slug string) *play {
	tl := &Timeline{Name: name, Crash: -1, Recovered: -1, Final: -1, Pruned: -1, Texts: map[string]string{}}
	p := &play{d: d, tl: tl, slug: slug, good: d.good, failing: d.failing, providerTimeout: 5 * time.Second}
	p.log.start, p.began = time.Now(), time.Now()
	return p
}

// runScenario plays sc and checks what it saw. It never returns early
// with children alive.
func (d *drill) runScenario(ctx context.Context, sc scenario) *Timeline {
	p := d.newPlay(sc.name, sc.slug())
	p.tl.Point, p.tl.Hit, p.tl.About = sc.point, sc.hit, about(sc.point)
	if sc.inFlight > 0 {
		p.tl.InFlight, p.tl.About = sc.inFlight, aboutInFlight(sc.point, sc.inFlight)
		p.serveArgs = []string{"--concurrency", fmt.Sprint(sc.inFlight)}
		p.good, p.holdEach, p.gate = nil, true, make(chan struct{})
		// Held calls end with the kill, never by serve's own timeout.
		p.providerTimeout = 2 * d.lim.scenario
	}
	p.budget, p.tl.Budget = sc.budget, sc.budget
	if sc.expect != nil || sc.family != "" {
		p.tl.Family, p.tl.Expect, p.tl.Why = sc.family, sc.expect, sc.why
	}
	if sc.about != "" {
		p.tl.About = sc.about
	}
	p.maxAttempts = sc.maxAttempts
	if sc.front != failNone {
		f, err := startFront(sc.front, sc.frontFails, sc.retryAfter, d.good.url)
		if err != nil {
			p.tl.Err = err
			p.finish(time.Now())
			return p.tl
		}
		defer f.stop()
		p.front = f
	}
	d.log.Info("scenario", "name", sc.name)
	start := time.Now()
	p.tl.Err = p.playPoint(ctx, sc)
	p.finish(start)
	return p.tl
}

func (p *play) playPoint(ctx context.Context, sc scenario) error {
	ctx, cancel := context.WithTimeoutCause(ctx, p.d.lim.scenario, fmt.Errorf("scenario %s exceeded its %s bound", p.tl.Name, p.d.lim.scenario))
	defer cancel()
	defer p.ps.killAll()
	defer p.stopOwnSim()
	if err := p.open(ctx); err != nil {
		return err
	}
	items := sc.items()
	if sc.inFlight > 0 {
		items = sc.inFlightItems(p.gate)
		if sc.trigger != triggerNone {
			p.tl.Trigger = items[slices.IndexFunc(items, func(it item) bool { return strings.HasSuffix(it.key, triggerSuffix) })].key
		}
	}
	p.startClients(ctx, [][]item{items})
	defer p.stopClients()
	for i, spec := range sc.runs {
		p.retry.Store(false) // until the run is ready: see snapRecovered
		p.retryAfterReady, p.openGateWhenReady = spec.retry, spec.openGate
		latency := spec.latency
		if latency == heldCall {
			latency, p.providerTimeout = p.d.lim.heldLatency, 2*p.d.lim.scenario
		}
		if latency > 0 {
			if err := p.useOwnSim(ctx, latency); err != nil {
				return err
			}
		}
		sv, err := p.startServe(ctx, spec.crashAt, spec.failing)
		if err != nil {
			return err
		}
		if spec.crashAt == "" {
			if err := p.cleanRun(ctx, sv, spec.until, i == len(sc.runs)-1); err != nil {
				return err
			}
			continue
		}
		if err := p.armedRun(ctx, sv, spec.crashAt); err != nil {
			return err
		}
		label := "after crash at " + spec.crashAt
		if !spec.target {
			label += " (setup)"
		}
		idx, err := p.snap(ctx, KindCrash, label)
		if err != nil {
			return err
		}
		if spec.target {
			p.tl.Crash = idx
		}
		if sc.inFlight > 0 {
			p.noteRunning(idx)
		}
	}
	if sc.prune {
		return p.pruneAndResend(ctx) // prune.go
	}
	return nil
}

// noteRunning records, after a crash read, how many attempts the dead
// serve left running: its calls in flight, and claims whose call had not
// started yet.
func (p *play) noteRunning(idx int) {
	n := 0
	for _, a := range p.tl.Snaps[idx].Attempts {
		if a.Status == inkwell.StatusRunning {
			n++
		}
	}
	p.tl.Running = append(p.tl.Running, n)
	p.event(fmt.Sprintf("%d attempt(s) running when it died", n), "")
}

// useOwnSim makes the provider of the next serve the scenario's own
// simulator with the given latency. The first call starts it on a new
// ledger; a call with another latency stops it and starts a new one on
// the same ledger, so a key billed before is answered from that record.
func (p *play) useOwnSim(ctx context.Context, latency time.Duration) error {
	if p.own != nil && p.ownLatency == latency {
		return nil
	}
	if err := p.stopOwnSim(); err != nil {
		return err
	}
	p.ownStarts++
	ledger := filepath.Join(p.d.work, "provider-sim-"+p.slug+".ledger.db")
	s, err := p.d.startSim(ctx, fmt.Sprintf("provider-sim-%s-%d", p.slug, p.ownStarts), simOptions{latency: latency, ledger: ledger})
	if err != nil {
		return err
	}
	p.own, p.ownLatency, p.good = s, latency, s
	if p.front != nil {
		return p.front.point(s.url)
	}
	return nil
}

// stopOwnSim stops the scenario's own simulator, if it runs.
func (p *play) stopOwnSim() error {
	if p.own == nil || !p.own.proc.alive() {
		return nil
	}
	if err := p.own.proc.stop(10 * time.Second); err != nil {
		return fmt.Errorf("stop %s: %w", p.own.proc.name, err)
	}
	return nil
}

// open makes the scenario's fresh database, with a budget for each
// account the clients submit for (check_budget.go).
func (p *play) open(ctx context.Context) error {
	dsn, err := p.d.dbs.fresh(ctx, p.slug)
	if err != nil {
		return fmt.Errorf("fresh database: %w", err)
	}
	p.dsn = dsn
	accounts := []string{"drill"} // the scenarios' clients; the random mode's are client1..n
	for i := range p.d.lim.clients {
		accounts = append(accounts, fmt.Sprintf("client%d", i+1))
	}
	if err := giveBudgets(ctx, dsn, cmp.Or(p.budget, DrillBudgetMicros), accounts...); err != nil {
		return err
	}
	return p.addWebhookAccounts(ctx) // webhooks.go
}

// startClients starts one client per workload; they run until every job
// is done or the scenario ends.
func (p *play) startClients(ctx context.Context, workloads [][]item) {
	ctx, p.cancelClients = context.WithCancel(ctx)
	p.clientsDone = make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	hc := newHTTPClient()
	for i, items := range workloads {
		c := &client{name: fmt.Sprintf("client%d", i+1), http: hc, srv: &p.srv, log: &p.log, retry: &p.retry, items: items, holdEach: p.holdEach}
		p.clients = append(p.clients, c)
		for _, it := range items {
			p.tl.Keys = append(p.tl.Keys, it.key)
			if it.overBudget {
				p.tl.OverBudget = append(p.tl.OverBudget, it.key)
			}
			if it.model == modelClaude {
				p.tl.Claude = append(p.tl.Claude, it.key)
			}
		}
		wg.Go(func() {
			if err := c.run(ctx); err != nil {
				mu.Lock()
				p.clientErr = errors.Join(p.clientErr, err)
				mu.Unlock()
			}
		})
	}
	go func() { wg.Wait(); close(p.clientsDone) }()
}

// stopClients stops the clients and waits for them.
func (p *play) stopClients() {
	p.cancelClients()
	select {
	case <-p.clientsDone:
	case <-time.After(15 * time.Second):
		p.event("clients did not stop within 15s", "")
	}
}

func (p *play) clientsFinished() bool {
	select {
	case <-p.clientsDone:
		return true
	default:
		return false
	}
}

// startServe starts `inkwell serve` on the scenario's database, armed with
// crashAt when it is not empty, and waits until it listens.
func (p *play) startServe(ctx context.Context, crashAt string, failing bool) (*child, error) {
	p.starts++
	name := fmt.Sprintf("serve#%d", p.starts)
	var provURL string
	switch {
	case failing:
		provURL = p.failing.url
	case p.front != nil && p.front.dead != "" && p.starts == 1:
		provURL = p.front.dead
	case p.front != nil:
		provURL = p.front.url
	default:
		provURL = p.good.url
	}
	// The providers and models come from a file written for this start:
	// its provider URL may differ from the last one's (models.go).
	config := filepath.Join(p.d.work, fmt.Sprintf("%s.serve-%d.toml", p.slug, p.starts))
	if err := writeServeConfig(config, provURL, p.providerTimeout); err != nil {
		return nil, err
	}
	args := []string{"serve", "--db", p.dsn, "--addr", "127.0.0.1:0", "--lane", "drill",
		"--config", config, "--grace", "5s",
		"--heartbeat", "500ms", "--poll", "100ms", "--log-format", "json", "--webhook-timeout", webhookTimeout,
		// The crash-point scenarios retry by hand (POST .../retry), so that
		// each point's reads follow the paths it allows; automatic retry
		// has scenarios of its own (joblife.go).
		"--max-attempts", fmt.Sprint(max(p.maxAttempts, 1))}
	if p.maxAttempts > 1 {
		args = append(args, "--retry-base", joblifeRetryBase, "--retry-cap", joblifeRetryCap)
	}
	args = append(args, p.serveArgs...)
	logPath := filepath.Join(p.d.work, fmt.Sprintf("%s.serve-%d.log", p.slug, p.starts))
	sv, err := startChild(name, p.d.cfg.Bin, args, childEnv(crashAt), logPath)
	if err != nil {
		return nil, err
	}
	p.ps.add(sv)
	what := name + " started"
	switch {
	case crashAt != "":
		what += " with INKWELL_CRASH_AT=" + crashAt
	case failing:
		what += " against a provider that answers every call with 500"
	}
	switch {
	case p.front != nil && p.front.dead != "" && p.starts == 1:
		what += " with a provider address where nothing listens (every call refused: nothing sent)"
	case p.front != nil && p.front.dead != "":
		what += " with the provider listening again"
	case p.front != nil && !failing:
		what += fmt.Sprintf(" behind the front, which %s to each key's first %d call(s)", p.front.how.words(), p.front.fails)
	}
	p.event(what, fmt.Sprintf("pid %d", sv.pid()))
	addr, err := sv.waitAddr(ctx, "http listening", p.d.lim.start)
	if err != nil {
		if crashAt != "" && !sv.alive() {
			return sv, nil // died at its point before listening
		}
		return nil, fmt.Errorf("%w; log %s, last lines:\n%s", err, logPath, sv.tailText())
	}
	sv.url = "http://" + addr
	return sv, nil
}

// armedRun waits for an armed serve to die at its point, snapshotting
// after its recovery if it becomes ready first.
func (p *play) armedRun(ctx context.Context, sv *child, crashAt string) error {
	ready, err := p.awaitReady(ctx, sv, true)
	if err != nil {
		return err
	}
	if ready {
		if err := p.snapRecovered(ctx, sv); err != nil {
			return err
		}
	}
	return p.awaitCrash(ctx, sv, crashAt)
}

// awaitReady polls GET /readyz until serve says its recovery is done. An
// armed serve may die first (mayDie): that returns false and no error.
func (p *play) awaitReady(ctx context.Context, sv *child, mayDie bool) (bool, error) {
	hc := &http.Client{Timeout: time.Second}
	err := sv.poll(ctx, p.d.lim.start, func() bool {
		res, err := hc.Get(sv.url + "/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	switch {
	case err == nil:
		return true, nil
	case mayDie && errors.Is(err, errExited):
		return false, nil
	}
	return false, fmt.Errorf("%s never became ready: %w; last lines:\n%s", sv.name, err, sv.tailText())
}

// awaitCrash waits for an armed serve to die by SIGKILL at its point, and
// proves it was the point: the crash point announces itself on stderr
// just before it kills the process.
func (p *play) awaitCrash(ctx context.Context, sv *child, crashAt string) error {
	name, nth, err := crashpoint.Parse(crashAt)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(p.d.lim.crash)
	var idleSince time.Time
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for sv.alive() {
		now := time.Now()
		if now.After(deadline) {
			sv.kill()
			return fmt.Errorf("%s armed with %s did not die within %s: the point was never reached; last lines:\n%s", sv.name, crashAt, p.d.lim.crash, sv.tailText())
		}
		if p.clientsFinished() {
			if idleSince.IsZero() {
				idleSince = now
			} else if now.Sub(idleSince) > 2*time.Second {
				sv.kill()
				return fmt.Errorf("%s armed with %s: every job finished and the point was never reached", sv.name, crashAt)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s to die at %s: %w", sv.name, crashAt, context.Cause(ctx))
		case <-sv.exited:
		case <-tick.C:
		}
	}
	p.died(sv)
	if !sv.killedBySIGKILL() {
		return fmt.Errorf("%s armed with %s exited with %s instead of dying at the point; last lines:\n%s", sv.name, crashAt, sv.exitText(), sv.tailText())
	}
	want := fmt.Sprintf("crashpoint: %s hit %d: SIGKILL", name, nth)
	if got := sv.crashLine(); got != want {
		return fmt.Errorf("%s died of SIGKILL but announced %q, want %q", sv.name, got, want)
	}
	p.event(fmt.Sprintf("%s died by SIGKILL at %s (hit %d)", sv.name, name, nth),
		fmt.Sprintf("pid %d, %s after start", sv.pid(), time.Since(sv.started).Round(time.Millisecond)))
	return nil
}

// cleanRun waits for an unarmed serve to recover and become ready, lets
// it run until the run's condition holds, stops it gracefully and reads
// the database.
func (p *play) cleanRun(ctx context.Context, sv *child, u until, last bool) error {
	if _, err := p.awaitReady(ctx, sv, false); err != nil {
		return err
	}
	if err := p.snapRecovered(ctx, sv); err != nil {
		return err
	}
	switch u {
	case untilAllFailed:
		if err := p.awaitAll(ctx, sv, inkwell.StatusFailed); err != nil {
			return err
		}
	case untilAllDone:
		if err := p.awaitClients(ctx, sv); err != nil {
			return err
		}
		if err := p.awaitWebhooks(ctx, sv); err != nil { // webhooks.go
			return err
		}
	}
	if err := p.stopServe(sv); err != nil {
		return err
	}
	kind, label := KindQuiet, "after a graceful stop (setup)"
	if last {
		kind, label = KindFinal, "final"
	}
	idx, err := p.snap(ctx, kind, label)
	if last {
		p.tl.Final = idx
	}
	return err
}

// awaitAll waits until the clients have read status for every job they
// have an answer for, and for one at least. (Every job of the one-job
// scenarios; in the in-flight family, the one job sent before the others,
// which wait for a later serve: item.gate.)
func (p *play) awaitAll(ctx context.Context, sv *child, status string) error {
	err := sv.poll(ctx, p.d.lim.settle, func() bool {
		answered := 0
		for _, c := range p.clients {
			for _, s := range c.statuses() {
				switch s {
				case "":
					continue // not sent, or not answered yet
				case status:
					answered++
				default:
					return false
				}
			}
		}
		return answered > 0
	})
	if err != nil {
		return fmt.Errorf("waiting for every job to be %s on %s: %w", status, sv.name, err)
	}
	p.event("every job is "+status, "")
	return nil
}

// awaitClients waits until every client saw every one of its jobs done.
func (p *play) awaitClients(ctx context.Context, sv *child) error {
	err := sv.poll(ctx, p.d.lim.settle, p.clientsFinished)
	if err != nil {
		var pending []string
		for _, c := range p.clients {
			pending = append(pending, c.name+": "+c.pending())
		}
		return fmt.Errorf("waiting for every job to be done on %s: %w; not done: %s", sv.name, err, strings.Join(pending, "; "))
	}
	if p.clientErr != nil {
		return p.clientErr
	}
	what := "every job is done"
	if slices.ContainsFunc(p.clients, func(c *client) bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return slices.ContainsFunc(c.items, func(it item) bool { return it.cancel != cancelNever })
	}) {
		what = "every job is done, or cancelled as the client asked"
	}
	p.event(what, "")
	return nil
}

// stopServe stops serve with SIGTERM, which must end in exit status 0.
func (p *play) stopServe(sv *child) error {
	err := sv.stop(p.d.lim.stop)
	p.died(sv)
	if err != nil {
		return err
	}
	p.event(sv.name+" stopped by SIGTERM, exit status 0", fmt.Sprintf("pid %d", sv.pid()))
	return nil
}

func (p *play) died(sv *child) {
	p.ended = true
	p.tl.DeadPIDs = append(p.tl.DeadPIDs, sv.pid())
}

// snapRecovered reads the database once a serve that followed a dead one
// is ready (its startup recovery has committed), and only then lets the
// clients reach it, as a load balancer routes only to ready instances:
// the "after recovery" snapshot shows what recovery left, not what a quick
// client did next.
func (p *play) snapRecovered(ctx context.Context, sv *child) error {
	defer func() {
		p.srv.set(sv.url)
		if p.retryAfterReady {
			p.retry.Store(true)
		}
		if p.openGateWhenReady {
			close(p.gate)
			p.openGateWhenReady = false
		}
	}()
	if !p.ended {
		return nil
	}
	idx, err := p.snap(ctx, KindRecovered, fmt.Sprintf("after restart (serve#%d recovered and ready)", p.starts))
	if err != nil {
		return err
	}
	if runs := p.tl.Snaps[idx].Runs; len(runs) > 0 {
		r := runs[len(runs)-1]
		p.event(fmt.Sprintf("serve#%d recovered: recovery run %d closed %d attempt(s) and failed %d job(s), then reported ready",
			p.starts, r.ID, r.AttemptsClosed, r.Failed), "")
	}
	return nil
}

// snap reads the database and the ledgers and keeps the snapshot. A read
// after a crash first waits for the dead serve's sessions to end (settle).
func (p *play) snap(ctx context.Context, kind Kind, label string) (int, error) {
	if kind == KindCrash {
		if err := p.settle(ctx); err != nil {
			return -1, fmt.Errorf("snapshot %s: %w", label, err)
		}
	}
	s, err := Inspect(ctx, p.dsn)
	if err != nil {
		return -1, fmt.Errorf("snapshot %s: %w", label, err)
	}
	s.Label, s.Kind = label, kind
	if s.Ledger, err = readLedgers(ctx, p.good, p.failing); err != nil {
		return -1, fmt.Errorf("snapshot %s: %w", label, err)
	}
	p.tl.Snaps = append(p.tl.Snaps, s)
	return len(p.tl.Snaps) - 1, nil
}

// settle waits until no session of the dead serve is left on the
// scenario's PostgreSQL database. A statement sent just before the kill,
// a COMMIT above all, still runs in its backend after the process is
// gone, and the read after the crash must see what it did, or the restart
// would appear to change what nobody alive touched. The scenario's
// database is its own, so every session on it but ours is the dead
// serve's. SQLite needs no wait: its writer was the process itself.
func (p *play) settle(ctx context.Context) error {
	if !p.d.dbs.server() {
		return nil
	}
	st, err := store.Open(ctx, p.dsn, store.Options{NoMigrate: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	defer st.Close()
	conn, err := st.DB().Conn(ctx) // one session, the only one of ours
	if err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	defer conn.Close()
	const others = `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`
	deadline := time.NewTimer(p.d.lim.stop)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		var n int
		if err := conn.QueryRowContext(ctx, others).Scan(&n); err != nil {
			return fmt.Errorf("settle: %w", err)
		}
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("settle: %w", context.Cause(ctx))
		case <-deadline.C:
			return fmt.Errorf("settle: %d session(s) of the dead serve still open on its database after %s", n, p.d.lim.stop)
		case <-tick.C:
		}
	}
}

func (p *play) event(what, extra string) {
	at := "at " + time.Since(p.began).Round(time.Millisecond).String()
	if extra != "" {
		at += ", " + extra
	}
	p.tl.Events = append(p.tl.Events, Event{What: what, Extra: at})
}

// finish collects what the clients saw and runs the checker.
func (p *play) finish(start time.Time) {
	tl := p.tl
	tl.Requests = p.log.all()
	tl.Gets = p.log.gets.Load()
	for _, c := range p.clients {
		c.mu.Lock()
		for _, it := range c.items {
			if it.status == inkwell.StatusDone {
				tl.Texts[it.key] = it.text
			}
		}
		c.mu.Unlock()
	}
	if tl.Recovered < 0 && tl.Crash >= 0 {
		for i := tl.Crash + 1; i < len(tl.Snaps); i++ {
			if tl.Snaps[i].Kind == KindRecovered {
				tl.Recovered = i
				break
			}
		}
	}
	tl.Violations = Check(Evidence{Snapshots: tl.Snaps, Keys: tl.Keys, Requests: tl.Requests, Texts: tl.Texts, DeadPIDs: tl.DeadPIDs,
		WebhookIDs: p.d.hooks.received(), OverBudget: tl.OverBudget, Catalog: drillCatalog()})
	tl.Violations = append(tl.Violations, tl.checkPaths()...)
	tl.Violations = append(tl.Violations, tl.checkInFlight()...)
	if tl.Err == nil && tl.Final < 0 {
		tl.Err = errors.New("the scenario ended without a final snapshot")
	}
	tl.Took = time.Since(start)
}
