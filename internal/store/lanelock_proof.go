package store

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/inkwell/inkwell"
)

// provePreviousGone is the second fact behind a granted flock: every
// previous holder on record (the lanes row, and the lock file when it names
// a holder the row does not) either stopped cleanly, released the lock, or
// its process is gone. When one is alive on this host, the lock file was
// deleted or replaced under it: the lane is refused and nothing is
// changed. What it found is kept in l.PreviousProcess as evidence.
func (s *Store) provePreviousGone(ctx context.Context, l *LaneLock) error {
	row, err := s.laneRow(ctx, l.Lane)
	if err != nil {
		return fmt.Errorf("lane %s: read its lanes row: %w", l.Lane, err)
	}
	findings, live := previousHolders(l, row)
	if live != nil {
		return s.liveHolderError(l.Lane, *live, row, "its lock file was deleted or replaced while its holder runs")
	}
	l.PreviousProcess = strings.Join(findings, "; ")
	return nil
}

// previousHolders checks each previous holder on record. It returns the
// findings in words, or the first holder whose process is alive.
func previousHolders(l *LaneLock, row *LaneRow) (findings []string, live *Holder) {
	if row == nil {
		findings = append(findings, "no previous holder in the lanes table")
	} else if row.StoppedAt != nil {
		findings = append(findings, fmt.Sprintf("previous holder (pid %d on host %s) is recorded stopped at %s (%s)",
			row.PID, row.Host, row.StoppedAt.UTC().Format(time.RFC3339), row.StopReason))
	} else if p := l.Previous; p != nil && p.Incarnation == row.Incarnation && p.ReleasedAt != nil {
		// The lock file just locked says this incarnation let go of it.
		findings = append(findings, fmt.Sprintf("previous holder (pid %d on host %s) released the lock at %s, per the lock file",
			row.PID, row.Host, p.ReleasedAt.UTC().Format(time.RFC3339)))
	} else if row.Incarnation != l.Self.Incarnation {
		h := row.holder()
		lv := checkHolder(h)
		if lv.Known && lv.Alive {
			return nil, &h
		}
		findings = append(findings, "previous holder per the lanes row, "+lv.Why)
	}
	if p := l.Previous; p != nil && p.ReleasedAt == nil && (row == nil || p.Incarnation != row.Incarnation) {
		lv := checkHolder(*p)
		if lv.Known && lv.Alive {
			return nil, p
		}
		findings = append(findings, "previous holder per the lock file, "+lv.Why)
	}
	return findings, nil
}

// heldError is the refusal when another process holds the flock. It names
// that process and what this host can tell of it, and says what to do:
// inspect the process; ending it lets recovery close its attempts.
func (s *Store) heldError(ctx context.Context, lane string, fileHolder *Holder) error {
	row, _ := s.laneRow(ctx, lane)
	var h Holder
	switch {
	case fileHolder != nil:
		h = *fileHolder
	case row != nil:
		h = row.holder()
	default:
		return inkwell.Errorf(inkwell.ELANEHELD, "lane %s is held by another process, which has not named itself yet (starting?): "+
			"refusing to start the lane or recover its rows while its holder is alive", lane)
	}
	return s.liveHolderError(lane, h, row, "another process holds its lock")
}

// liveHolderError says who holds the lane and what to do about it. It
// never suggests touching the lock file: that is how two processes come
// to run one lane.
func (s *Store) liveHolderError(lane string, h Holder, row *LaneRow, why string) error {
	lv := checkHolder(h)
	var b strings.Builder
	fmt.Fprintf(&b, "lane %s: %s: pid %d on host %s, since %s (incarnation %s)", lane, why, h.PID, h.Host,
		h.Since.UTC().Format(time.RFC3339), h.Incarnation)
	if row != nil && row.Incarnation == h.Incarnation {
		fmt.Fprintf(&b, ", last heartbeat %s ago", s.now().Sub(row.HeartbeatAt).Round(time.Second))
	}
	switch {
	case h.PID == os.Getpid() && h.Host == hostname():
		// The file names this very process: the lock is held through
		// another open file of it, or of a child that shares one.
		b.WriteString("; that is this very process: the lane is held twice in it, or a child process it started shares the lock file's descriptor " +
			"(find it: lsof or fuser on the lane's lock file)")
	case lv.Known && lv.Alive:
		fmt.Fprintf(&b, "; that process is alive, %s: if it is stopped or hung, inspect it (ps -o pid,stat,wchan:32,cmd -p %d); "+
			"ending it lets recovery close its attempts", lv.State, h.PID)
	case lv.Known:
		fmt.Fprintf(&b, "; %s, yet another process holds the lock: find it (lsof or fuser on the lane's lock file) "+
			"and end it; recovery then closes its attempts", lv.Why)
	default:
		fmt.Fprintf(&b, "; if that process is stopped or hung, inspect it on host %s; ending it lets recovery close its attempts", h.Host)
	}
	b.WriteString(". Refusing to start the lane or recover its rows while its holder is alive")
	return inkwell.Errorf(inkwell.ELANEHELD, "%s", b.String())
}

// holder is the lanes row's incarnation as a Holder.
func (r LaneRow) holder() Holder {
	return Holder{PID: r.PID, Host: r.Host, Incarnation: r.Incarnation, Since: r.StartedAt, BootID: r.BootID, ProcStart: r.ProcStart}
}

// ProcessGone says the process of the row's holder is proven gone, by
// what this host can see (checkHolder), and why in words either way.
func (r LaneRow) ProcessGone() (bool, string) {
	lv := checkHolder(r.holder())
	return lv.Known && !lv.Alive && !lv.Self, lv.Why
}

// SilentLaneAdvice says, for a lane whose heartbeat has gone silent, what
// this host can tell of its process and what to do: a live holder (stopped
// or hung) is to be inspected, and ending it lets recovery close its
// attempts; a gone one means the lane can be restarted. It reads the
// process table only and changes nothing.
func (r LaneRow) SilentLaneAdvice() string {
	lv := checkHolder(r.holder())
	switch {
	case lv.Known && lv.Alive:
		return fmt.Sprintf("its process pid %d on host %s still runs (%s) and holds the lane: inspect it (ps -o pid,stat,wchan:32,cmd -p %d); "+
			"ending it lets recovery close its attempts", r.PID, r.Host, lv.State, r.PID)
	case lv.Known:
		return fmt.Sprintf("%s: restart the lane (inkwell serve --lane %s); its startup recovery closes its attempts", lv.Why, r.Name)
	default:
		return fmt.Sprintf("%s: if it still runs (stopped or hung?), inspect it there; ending it lets recovery close its attempts; "+
			"if it is gone, restart the lane (inkwell serve --lane %s)", lv.Why, r.Name)
	}
}
