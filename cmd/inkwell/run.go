package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/inkwell/inkwell"
)

// command is one subcommand: its one-line summary and its entry point.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// commands is filled by each subcommand file's init, so adding a command
// touches only its own file.
var commands = map[string]command{}

func register(name, summary string, run func(ctx context.Context, args []string, stdout, stderr io.Writer) int) {
	commands[name] = command{summary: summary, run: run}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 2 && args[0] == "help" { // 'inkwell help serve' is 'inkwell serve --help'
		args = []string{args[1], "--help"}
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "inkwell: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	return cmd.run(ctx, args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprint(w, `inkwell is a crash-safe job service for paid text generation.

Usage: inkwell COMMAND [flags]

Commands:
`)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-13s %s\n", n, commands[n].summary)
	}
	fmt.Fprint(w, `
Run 'inkwell COMMAND --help' (or 'inkwell help COMMAND') for a command's flags.
Quick start: 'inkwell serve' in one terminal, 'inkwell submit --prompt "a haiku about ink" --wait' in another.
`)
}

// newFlags returns a FlagSet whose --help prints the description and flags
// to stdout and exits 0, and whose parse errors go to stderr.
func newFlags(name, synopsis, description string, stdout, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		out := fs.Output()
		fmt.Fprintf(out, "Usage: inkwell %s %s\n\n%s\n\nFlags:\n", name, synopsis, strings.TrimSpace(description))
		printFlags(out, fs)
	}
	return fs
}

// printFlags lists fs's flags as every command's help and the docs write
// them, with two dashes (flag.PrintDefaults writes one): "--db PATH".
// Either form is accepted on the command line.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		typ, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if typ != "" {
			line += " " + typ
		}
		fmt.Fprintf(w, "%s\n    \t%s", line, strings.ReplaceAll(usage, "\n", "\n    \t"))
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "0s" && f.DefValue != "false" {
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
}

// parseFlags parses args; it returns (exit code, false) when the command
// should stop: 0 after --help, 2 after a bad flag. Flags may follow the
// positional arguments, as the synopses write them ('show ID --db PATH');
// the positional arguments end up in fs.Args(), and "--" ends the flags.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) (int, bool) {
	// flag prints the usage itself on -h and on a bad flag; keep it quiet
	// and print once, here: help to stdout, a mistake to stderr.
	stderr := fs.Output()
	fs.SetOutput(io.Discard)
	defer fs.SetOutput(stderr)
	// "show -1" and "show --json -1" name a job, badly: let the command
	// say so in its own words rather than "flag provided but not
	// defined: -1".
	positional, args := negativesApart(fs, args)
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return 0, false
		}
		if err != nil {
			fmt.Fprintf(stderr, "inkwell %s: %v\n\n", fs.Name(), err)
			fs.SetOutput(stderr)
			fs.Usage()
			return 2, false
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			positional = append(positional, rest...) // after "--", nothing is a flag
			break
		}
		positional, args = append(positional, rest[0]), rest[1:]
	}
	_ = fs.Parse(append([]string{"--"}, positional...)) // sets fs.Args(); parses no flag
	return 0, true
}

// negativesApart takes out of args the arguments that are a minus sign and
// digits and no flag's value (never a flag of ours: a mistaken job id),
// and returns them apart, in order, and the rest. A flag that takes a
// value keeps it ("status --jobs -1"), and nothing after "--" is touched.
func negativesApart(fs *flag.FlagSet, args []string) (negatives, rest []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return negatives, append(rest, args[i:]...)
		case negativeNumber(a):
			negatives = append(negatives, a)
			continue
		}
		rest = append(rest, a)
		if takesValue(fs, a) && i+1 < len(args) {
			i++
			rest = append(rest, args[i]) // the flag's value, whatever it looks like
		}
	}
	return negatives, rest
}

// takesValue reports whether arg is a flag of fs ("-name" or "--name",
// without "=") whose value is the next argument: any flag but a bool one.
func takesValue(fs *flag.FlagSet, arg string) bool {
	name, ok := strings.CutPrefix(arg, "--")
	if !ok {
		if name, ok = strings.CutPrefix(arg, "-"); !ok {
			return false
		}
	}
	f := fs.Lookup(name) // nil for "-name=value" and for unknown names
	if f == nil {
		return false
	}
	b, isBool := f.Value.(interface{ IsBoolFlag() bool })
	return !isBool || !b.IsBoolFlag()
}

// negativeNumber reports whether arg is a minus sign and digits: never a
// flag of ours, always a mistaken positional argument (a job id).
func negativeNumber(arg string) bool {
	if len(arg) < 2 || arg[0] != '-' {
		return false
	}
	for _, c := range arg[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// dbFlag adds the shared --db flag, defaulting to $INKWELL_DB or inkwell.db.
func dbFlag(fs *flag.FlagSet) *string {
	def := os.Getenv("INKWELL_DB")
	if def == "" {
		def = "inkwell.db"
	}
	return fs.String("db", def, "database: a SQLite file path or a postgres:// URL (env INKWELL_DB)")
}

// fail prints err for a person and returns exit status 1.
func fail(stderr io.Writer, cmd string, err error) int {
	var ie *inkwell.Error
	if errors.As(err, &ie) {
		fmt.Fprintf(stderr, "inkwell %s: %s\n", cmd, ie.Message)
		if err.Error() != ie.Error() { // the cause: host, driver message…
			fmt.Fprintf(stderr, "  detail: %v\n", err)
		}
		return 1
	}
	fmt.Fprintf(stderr, "inkwell %s: %v\n", cmd, err)
	return 1
}

// flagsOnly refuses a stray word after the flags of a command that takes
// none (exit 2, before anything is opened or written): "inkwell migrate
// real.db" or "inkwell recover web2" must not act on the default database
// or lane instead of the one meant.
func flagsOnly(fs *flag.FlagSet, stderr io.Writer, hint string) bool {
	if fs.NArg() == 0 {
		return true
	}
	fmt.Fprintf(stderr, "inkwell %s: unexpected argument %q: %s takes flags only (%s)\n", fs.Name(), fs.Arg(0), fs.Name(), hint)
	return false
}
