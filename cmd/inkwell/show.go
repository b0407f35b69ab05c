package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

func init() {
	register("show", "print one job: its request, attempts, result and charge", runShow)
}

const showHelp = `
Show prints one job's timeline straight from the database: the request,
every attempt (lane, start, finish, error, and the recovery run that closed
it, if one did), the result text and the charge. It works whether or not a
server is running.`

func runShow(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("show", "ID [--db PATH] [--json]", showHelp, stdout, stderr)
	db := dbFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON instead of text")
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "inkwell show: give exactly one job ID")
		return 2
	}
	id, err := strconv.ParseInt(fs.Arg(0), 10, 64)
	if err != nil || id < 1 {
		fmt.Fprintf(stderr, "inkwell show: job ID %q must be a positive whole number\n", fs.Arg(0))
		return 2
	}
	st, err := openForReading(ctx, *db)
	if err != nil {
		return fail(stderr, "show", err)
	}
	defer st.Close()
	// Every read first, then the printing: a file read without locks is
	// checked once, after the reads (readAsOpened).
	d, err := st.Show(ctx, id)
	if err = readAsOpened(st, err); err != nil {
		return fail(stderr, "show", err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(d)
		return 0
	}
	ev, err := readEvidence(ctx, st, d)
	r, rerr := st.Reservation(ctx, id)
	if err = readAsOpened(st, err); err != nil {
		return fail(stderr, "show", err)
	}
	printDetail(stdout, d)
	if rerr == nil && r.State != "" {
		fmt.Fprintf(stdout, "\nbudget  %s %s on account %s%s\n", formatMoney(r.Micros), r.State, r.Account, reservationHint(r, d.Job.Status))
	}
	printEvidence(stdout, ev)
	return 0
}

// reservationHint says what an open reservation of a failed job waits for.
func reservationHint(r store.Reservation, status string) string {
	if r.State == store.ReservationOpen && status == inkwell.StatusFailed {
		return " (kept: the provider may have billed; retry, or 'inkwell accounts release " + strconv.FormatInt(r.JobID, 10) + "')"
	}
	return ""
}

// evidence is what the database says about why a job is where it is: the
// recovery runs that closed its attempts, and its next safe action.
type evidence struct {
	runs []store.RecoveryRun
	next *store.BoardRow // nil for a done job
}

func readEvidence(ctx context.Context, st *store.Store, d inkwell.JobDetail) (evidence, error) {
	var ev evidence
	seen := map[int64]bool{}
	for _, a := range d.Attempts {
		if a.RecoveryRunID == nil || seen[*a.RecoveryRunID] {
			continue
		}
		seen[*a.RecoveryRunID] = true
		run, err := st.RecoveryRunByID(ctx, *a.RecoveryRunID)
		if err != nil {
			return ev, err
		}
		ev.runs = append(ev.runs, run)
	}
	var err error
	ev.next, err = st.BoardRowByID(ctx, d.Job.ID)
	return ev, err
}

func printEvidence(w io.Writer, ev evidence) {
	for _, run := range ev.runs {
		fmt.Fprintf(w, "\nclosed by startup recovery\n")
		printRecoveryRun(w, &run)
	}
	if ev.next != nil {
		fmt.Fprintf(w, "\nnext: %s\n", ev.next.NextAction)
	}
}

func printDetail(w io.Writer, d inkwell.JobDetail) {
	j := d.Job
	fmt.Fprintf(w, "job %d  %s\n", j.ID, j.Status)
	fmt.Fprintf(w, "  key       %s\n", j.IdempotencyKey)
	if model := modelOf(d); model != "" {
		fmt.Fprintf(w, "  model     %s\n", model)
	}
	fmt.Fprintf(w, "  request   %s\n", string(j.Payload))
	fmt.Fprintf(w, "  accepted  %s\n", fmtTime(&j.CreatedAt))
	if j.StartedAt != nil {
		fmt.Fprintf(w, "  started   %s on lane %s\n", fmtTime(j.StartedAt), j.Lane)
	}
	if j.FinishedAt != nil {
		fmt.Fprintf(w, "  finished  %s\n", fmtTime(j.FinishedAt))
	}
	if j.Error != "" {
		fmt.Fprintf(w, "  error     %s\n", j.Error)
	}
	if j.ErrorClass != "" {
		fmt.Fprintf(w, "  class     %s\n", j.ErrorClass)
	}
	if j.Status == inkwell.StatusQueued && j.NotBefore != nil {
		fmt.Fprintf(w, "  waiting   automatic retry, not before %s\n", fmtTime(j.NotBefore))
	}
	if j.PrunedAt != nil {
		fmt.Fprintf(w, "  pruned    %s (retention removed its prompt and text)\n", fmtTime(j.PrunedAt))
	}
	fmt.Fprintf(w, "\nattempts (%d)\n", len(d.Attempts))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  #\tSTATUS\tCLASS\tLANE\tSTARTED\tFINISHED\tERROR")
	for _, a := range d.Attempts {
		errText := a.Error
		if a.RecoveryRunID != nil {
			errText += fmt.Sprintf(" (recovery run %d)", *a.RecoveryRunID)
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\n", a.AttemptNumber, a.Status, orDash(string(a.ErrorClass)), orDash(a.Lane),
			fmtTime(a.StartedAt), fmtTime(a.FinishedAt), orDash(errText))
	}
	tw.Flush()
	if d.Charge != nil {
		c := d.Charge
		fmt.Fprintf(w, "\ncharge  %s  account %s  provider request %s  (attempt %s)\n", formatMoney(c.AmountMicros), c.Account, c.ProviderRequestID, attemptNumberOf(d, c.AttemptID))
	}
	if r := d.Result; r != nil {
		if r.PromptTokens != nil && r.CompletionTokens != nil {
			fmt.Fprintf(w, "tokens  %d prompt + %d completion = %d\n", *r.PromptTokens, *r.CompletionTokens, *r.PromptTokens+*r.CompletionTokens)
		}
		if r.FinishReason != "" {
			fmt.Fprintf(w, "finish  %s\n", r.FinishReason)
		}
		calls := toolCalls(r.Response)
		switch {
		case r.Text == "" && calls == "":
			// A billed answer of no text (a reasoning model out of
			// tokens, Claude's empty end_turn): say so, not a blank.
			fmt.Fprintf(w, "\nresult\n(no text: the provider answered nothing, finish %s)\n", orDash(r.FinishReason))
		case r.Text != "":
			fmt.Fprintf(w, "\nresult\n%s\n", r.Text)
		}
		if calls != "" {
			fmt.Fprintf(w, "\ntool calls\n%s\n", calls)
		}
	}
}

// modelOf is the model a job ran on (its result's), or the one it asks
// for (its payload's; "" for the default model).
func modelOf(d inkwell.JobDetail) string {
	if d.Result != nil && d.Result.Model != "" {
		return d.Result.Model
	}
	var p struct {
		Model string `json:"model"`
	}
	if json.Unmarshal(d.Job.Payload, &p) == nil && p.Model != "" {
		return p.Model + " (asked for)"
	}
	return ""
}

// toolCalls is the answer's tool calls as JSON, "" when it made none.
func toolCalls(response json.RawMessage) string {
	var c struct {
		Choices []struct {
			Message struct {
				ToolCalls json.RawMessage `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
	}
	if json.Unmarshal(response, &c) != nil || len(c.Choices) == 0 {
		return ""
	}
	if tc := c.Choices[0].Message.ToolCalls; len(tc) > 0 && string(tc) != "null" && string(tc) != "[]" {
		return string(tc)
	}
	return ""
}

// attemptNumberOf names the attempt with row id id by its number, as the
// attempts table above shows it.
func attemptNumberOf(d inkwell.JobDetail, id int64) string {
	for _, a := range d.Attempts {
		if a.ID == id {
			return fmt.Sprintf("#%d", a.AttemptNumber)
		}
	}
	return fmt.Sprintf("row id %d", id)
}

func fmtTime(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return inkwell.FormatTime(*t)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// formatMoney prints an amount with its unit: currency units (as
// 'accounts add --budget' takes them) and the micros stored.
func formatMoney(micros int64) string {
	return fmt.Sprintf("%s currency units (%d micros)", formatAmount(micros), micros)
}
