package main

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/inkwell/inkwell/internal/store"
)

// Retention (serve --retention, docs/design.md §9): a loop in serve that prunes
// the jobs finished longer ago than --retention, soon after start and then
// every hour, with the store's Prune (small low-priority transactions; see
// internal/store/prune.go). It stops with serve: a prune cut short keeps
// what it pruned, and the rest waits for the next run.

// retentionFirst and retentionEvery are when the loop runs: a minute after
// the lane is ready (startup recovery and the first claims go first), then
// hourly. Nanoseconds, atomic: in-process tests shorten them.
var retentionFirst, retentionEvery atomic.Int64

func init() {
	retentionFirst.Store(int64(time.Minute))
	retentionEvery.Store(int64(time.Hour))
}

// startRetention starts the retention loop when --retention is not 0 and
// returns the function that stops it and waits for it to end.
func (m *Main) startRetention(ctx context.Context) (stop func()) {
	log := m.log.With("component", "retention")
	if m.cfg.Retention <= 0 {
		log.Info("retention off (--retention 0): finished jobs keep their prompt and text")
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.retentionLoop(ctx, log)
	}()
	return func() {
		cancel()
		<-done
	}
}

func (m *Main) retentionLoop(ctx context.Context, log *slog.Logger) {
	every := time.Duration(retentionEvery.Load())
	t := time.NewTimer(time.Duration(retentionFirst.Load()))
	defer t.Stop()
	log.Info("retention on: jobs finished longer ago than --retention lose their prompt and text", "retention", m.cfg.Retention.String(), "every", every.String())
	warned := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m.pruneOnce(ctx, log, &warned)
		t.Reset(every)
	}
}

// pruneOnce runs one prune and logs what it did.
func (m *Main) pruneOnce(ctx context.Context, log *slog.Logger, warned *bool) {
	rep, err := m.st.PruneOlderThan(ctx, m.cfg.Retention, store.PruneOptions{
		By:            store.ActorRetention,
		ProgressEvery: 30 * time.Second,
		Progress: func(p store.PruneProgress) {
			if p.Pruned < p.Matched {
				log.Info("retention: pruning", "pruned", p.Pruned, "of", p.Matched, "elapsed", p.Elapsed.Round(time.Millisecond).String())
			}
		},
	})
	attrs := []any{"jobs", rep.Pruned, "done", rep.PrunedDone, "failed", rep.PrunedFailed, "finished_before", rep.Before.Format(time.RFC3339),
		"batches", rep.Batches, "longest_batch", rep.LongestBatch.String(), "batches_over_50ms", rep.SlowBatches, "took", rep.Elapsed.Round(time.Millisecond).String()}
	if rep.HeldByBatch > 0 {
		// Old enough, but their batch had not ended: its output is still to be read.
		attrs = append(attrs, "kept_for_unended_batch", rep.HeldByBatch)
	}
	if rep.Expired.Files > 0 {
		attrs = append(attrs, "expired_uploads_deleted", rep.Expired.Files, "expired_upload_bytes", rep.Expired.Bytes)
	}
	if m.st.Path() != "" && (rep.Pruned > 0 || rep.Expired.Files > 0) {
		attrs = append(attrs, "file_bytes_before", rep.FileBefore, "file_bytes_after", rep.FileAfter, "pages_vacuumed", rep.PagesVacuumed)
	}
	switch {
	case err != nil && ctx.Err() != nil:
		log.Info("retention: stopped by the shutdown; what was pruned stays pruned, the rest waits for the next run", attrs...)
		return
	case err != nil:
		log.Warn("retention: prune failed; it runs again at the next interval", append(attrs, "err", err)...)
		return
	case rep.Pruned == 0 && rep.Expired.Files > 0:
		log.Info("retention: deleted the uploads past their expiry", attrs...)
		return
	case rep.Pruned == 0:
		log.Debug("retention: nothing to prune", "finished_before", rep.Before.Format(time.RFC3339), "kept_for_unended_batch", rep.HeldByBatch)
		return
	}
	log.Info("retention: pruned the prompt and text of finished jobs", attrs...)
	if rep.AutoVacuum == "none" && rep.FreePages > 0 && !*warned {
		*warned = true
		log.Warn("retention: this SQLite file was created without incremental auto-vacuum: the pages prune frees are reused by new jobs, "+
			"but the file does not shrink until 'inkwell prune --vacuum' rebuilds it (VACUUM holds the write lock throughout: stop serve first)",
			"free_pages", rep.FreePages, "free_bytes", rep.FreePages*rep.PageSize)
	}
}
