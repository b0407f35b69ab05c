package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

func stoppedLane(name, reason string) store.LaneState {
	now := time.Now().UTC()
	stopped := now.Add(-time.Minute)
	return store.LaneState{Lane: name, State: "stopped", HeartbeatAge: "1m", PID: 42, Host: "h",
		StartedAt: now.Add(-time.Hour), StoppedAt: &stopped, StopReason: reason, Slots: 1}
}

// Every stop reason is printed whole, once, and a long one is on its own line.
func TestStatus_StopReasonPrintedWholeOnce(t *testing.T) {
	t.Parallel()
	short := "shutdown"
	exact := strings.Repeat("x", shortReason)
	long := "stopped: " + strings.TrimSpace(strings.Repeat("database file replaced ", 10))
	var buf bytes.Buffer
	printStatus(&buf, statusReport{Lanes: []store.LaneState{stoppedLane("a", short), stoppedLane("b", exact), stoppedLane("c", long)}}, 0)
	out := buf.String()
	for _, r := range []string{"(" + short + ")", "(" + exact + ")", long} {
		if strings.Count(out, r) != 1 {
			t.Errorf("reason %q appears %d times:\n%s", r, strings.Count(out, r), out)
		}
	}
	if !strings.Contains(out, "stopped (below)") || !strings.Contains(out, "  lane c stopped at ") {
		t.Errorf("long reason not under the table:\n%s", out)
	}
}

// A stop reason is text from an error (the lane writes "stopped: " +
// cause.Error(); errors.Join and paths may hold newlines): printed raw, its
// newline starts a line of status's own form that no lane wrote.
func TestStatus_StopReasonForgesNoLine(t *testing.T) {
	t.Parallel()
	reason := "stopped: database files replaced\n  lane b is paused by the provider's 429 until 2099-01-01T00:00:00Z: its calls wait; nothing to do"
	var buf bytes.Buffer
	printStatus(&buf, statusReport{Lanes: []store.LaneState{stoppedLane("a", reason)}}, 0)
	for _, line := range strings.Split(buf.String(), "\n") {
		if strings.HasPrefix(line, "  lane b ") {
			t.Errorf("a stop reason of lane a forged a line about lane b: %q\n%s", line, buf.String())
		}
	}
	// A short reason with a tab or newline breaks the table's columns.
	buf.Reset()
	printStatus(&buf, statusReport{Lanes: []store.LaneState{stoppedLane("a", "x\ty\nz")}}, 0)
	if strings.Contains(buf.String(), "\nz") {
		t.Errorf("a short reason's newline split the lanes table:\n%s", buf.String())
	}
}

// TestStatus_LongStopReasonBelowTheTable: a short stop reason
// ("shutdown") stays in the lanes table's STATE column; a long one (a
// recovery's evidence, an error) is a line of its own below the table,
// whole, so the table's columns stay readable.
func TestStatus_LongStopReasonBelowTheTable(t *testing.T) {
	t.Parallel()
	stopped := time.Now().Add(-time.Minute).UTC()
	long := "dead: recovery run 2 took its lane lock (flock) and found its process gone (pid 4242 on host vm: gone)"
	var out bytes.Buffer
	printStatus(&out, statusReport{Lanes: []store.LaneState{
		{Lane: "web1", State: "stopped", HeartbeatAge: "1m", PID: 4241, Host: "vm", StoppedAt: &stopped, StopReason: "shutdown", Slots: 16},
		{Lane: "web2", State: "stopped", HeartbeatAge: "1m", PID: 4242, Host: "vm", StoppedAt: &stopped, StopReason: long, Slots: 16},
	}}, 0)
	text := out.String()
	var rows []string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "  web") {
			rows = append(rows, line)
		}
	}
	if len(rows) != 2 || !strings.Contains(rows[0], "stopped (shutdown)") || !strings.Contains(rows[1], "stopped (below)") || strings.Contains(rows[1], "recovery run") {
		t.Errorf("lanes table rows %q; want web1 'stopped (shutdown)' and web2 'stopped (below)' without its reason", rows)
	}
	if want := "  lane web2 stopped at " + inkwell.FormatTime(stopped) + ": " + long + "\n"; !strings.Contains(text, want) {
		t.Errorf("status text lacks %q:\n%s", want, text)
	}
}
