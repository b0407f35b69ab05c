package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"text/tabwriter"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/catalog"
	"github.com/inkwell/inkwell/internal/provider"
)

func init() {
	register("models", "the providers and models a config file defines, checked as serve reads it", runModels)
}

const modelsHelp = `
Models reads a config file as 'inkwell serve --config FILE' does
(docs/providers.md) and prints its providers and models: per provider its
kind, URL, the environment variable holding its API key and whether that
variable is set here (never its value), its limits, its timeout and
whether it honours idempotency keys; per model its provider, the name sent
upstream, its prices per million tokens in currency units, the most one
answer may write, and which model is the default.

A file serve would refuse is refused here with the same error, naming the
line (exit 2), so a file can be checked before serve starts. Without a
file, serve runs one provider from its flags (--provider sim by default)
that answers any model name. It changes nothing.`

// configFlag adds the --config flag, defaulting to $INKWELL_CONFIG as
// serve's does.
func configFlag(fs *flag.FlagSet) *string {
	return fs.String("config", os.Getenv("INKWELL_CONFIG"), "the config `FILE` (TOML) defining providers and models, docs/providers.md (env INKWELL_CONFIG)")
}

func runModels(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("models", "[--config FILE] [--json]", modelsHelp, stdout, stderr)
	path := configFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON instead of tables")
	if code, ok := parseFlags(fs, args, stdout); !ok {
		return code
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "inkwell models: unexpected argument %q (the file is --config FILE)\n", fs.Arg(0))
		return 2
	}
	if *path == "" {
		return printNoConfig(stdout, *asJSON)
	}
	cat, err := catalog.Load(*path)
	var fe *catalog.FileError
	switch {
	case errors.As(err, &fe):
		fmt.Fprintf(stderr, "inkwell models: %v\n", err)
		return 2
	case errors.Is(err, os.ErrNotExist):
		fmt.Fprintf(stderr, "inkwell models: %v: give --config (or INKWELL_CONFIG) an existing file\n", err)
		return 2
	case err != nil:
		return fail(stderr, "models", err)
	}
	if *asJSON {
		return printModelsJSON(stdout, newCatalogJSON(cat, os.LookupEnv))
	}
	printCatalog(stdout, newCatalogJSON(cat, os.LookupEnv))
	return 0
}

// printNoConfig says what serve runs without a file: the catalog of its
// default flags.
func printNoConfig(stdout io.Writer, asJSON bool) int {
	p := catalog.Provider{Name: catalog.KindSim, Kind: catalog.KindSim, HonoursKeys: true}
	cat := catalog.Single(p, provider.DefaultModel, inkwell.MaxMaxWords*inkwell.TokensPerWord)
	if asJSON {
		return printModelsJSON(stdout, newCatalogJSON(cat, os.LookupEnv))
	}
	fmt.Fprint(stdout, `No config file (--config FILE or env INKWELL_CONFIG).
Without one, 'inkwell serve' runs one provider from its flags: --provider sim
by default (in process, free), or --provider openai with --provider-url and
--model. That provider answers any model name a request sends; a request that
names none runs on `+provider.DefaultModel+` (or --model).
To serve several models and providers, with prices, write a config file
(docs/providers.md) and check it with 'inkwell models --config FILE'.
`)
	return 0
}

func printModelsJSON(stdout io.Writer, v any) int {
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return exitOf(enc.Encode(v))
}

// catalogJSON is the catalog as 'models --json' prints it, in the config
// file's own key names.
type catalogJSON struct {
	Path         string         `json:"path"`
	DefaultModel string         `json:"default_model"`
	AnyModel     bool           `json:"any_model"` // no file: the one provider answers any model name
	Providers    []providerJSON `json:"providers"`
	Models       []modelJSON    `json:"models"`
	// Warnings are what the file allows but may cost money
	// (catalog.TimeoutWarnings).
	Warnings []string `json:"warnings,omitempty"`
}

type providerJSON struct {
	Name        string `json:"name"`
	Kind        string `json:"kind"`
	URL         string `json:"url,omitempty"`
	KeyEnv      string `json:"key_env,omitempty"`
	KeySet      bool   `json:"key_set"` // the variable key_env names is set, not empty, here
	RPM         int    `json:"rpm"`
	TPM         int    `json:"tpm"`
	Timeout     string `json:"timeout"`
	HonoursKeys bool   `json:"honours_keys"`
	Latency     string `json:"latency,omitempty"`
	// OutputLimitField is output_limit_field, when the file sets it.
	OutputLimitField string `json:"output_limit_field,omitempty"`
}

type modelJSON struct {
	Name                string `json:"name"`
	Provider            string `json:"provider"`
	Upstream            string `json:"upstream"`
	InputMicrosPerMTok  int64  `json:"input_micros_per_mtok"`
	OutputMicrosPerMTok int64  `json:"output_micros_per_mtok"`
	MaxOutputTokens     int    `json:"max_output_tokens"`
	MaxImageTokens      int64  `json:"max_image_tokens"`
	MaxInputTokens      int64  `json:"max_input_tokens"` // 0: none named
	Default             bool   `json:"default"`
}

// newCatalogJSON reads whether each key is set through lookupEnv, and
// keeps no value.
func newCatalogJSON(c *catalog.Catalog, lookupEnv func(string) (string, bool)) catalogJSON {
	out := catalogJSON{Path: c.Path, DefaultModel: c.Default, AnyModel: c.AnyModel, Warnings: c.TimeoutWarnings(),
		Providers: []providerJSON{}, Models: []modelJSON{}}
	for _, p := range c.Providers {
		pj := providerJSON{Name: p.Name, Kind: p.Kind, URL: p.URL, KeyEnv: p.KeyEnv, RPM: p.RPM, TPM: p.TPM,
			Timeout: p.Timeout.String(), HonoursKeys: p.HonoursKeys, OutputLimitField: p.LimitField}
		if p.KeyEnv != "" {
			v, _ := lookupEnv(p.KeyEnv)
			pj.KeySet = v != ""
		}
		if p.Kind == catalog.KindSim {
			pj.Latency = p.Latency.String()
		}
		out.Providers = append(out.Providers, pj)
	}
	for _, m := range c.Models {
		out.Models = append(out.Models, modelJSON{Name: m.Name, Provider: m.Provider, Upstream: m.Upstream,
			InputMicrosPerMTok: m.InputMicrosPerMTok, OutputMicrosPerMTok: m.OutputMicrosPerMTok,
			MaxOutputTokens: m.MaxOutputTokens, MaxImageTokens: m.ImageTokens, MaxInputTokens: m.InputTokens, Default: m.Name == c.Default})
	}
	return out
}

func printCatalog(w io.Writer, c catalogJSON) {
	fmt.Fprintf(w, "CONFIG %s\n\nPROVIDERS\n", c.Path)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  NAME\tKIND\tURL\tKEY_ENV\tKEY\tRPM\tTPM\tTIMEOUT\tHONOURS KEYS")
	var unset []providerJSON
	for _, p := range c.Providers {
		key := "-"
		if p.KeyEnv != "" {
			key = "set"
			if !p.KeySet {
				key, unset = "NOT SET", append(unset, p)
			}
		}
		url := orDash(p.URL)
		if p.Kind == catalog.KindSim {
			url = "(in process, latency " + p.Latency + ")"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, p.Kind, url, orDash(p.KeyEnv), key,
			limitText(p.RPM), limitText(p.TPM), p.Timeout, yesNoText(p.HonoursKeys))
	}
	tw.Flush()
	for _, p := range c.Providers {
		if p.OutputLimitField != "" {
			fmt.Fprintf(w, "  provider %s is sent the output limit as %s only\n", p.Name, p.OutputLimitField)
		}
	}
	for _, p := range unset {
		fmt.Fprintf(w, "  %s is not set in this environment: set it where 'inkwell serve' runs, or provider %s's calls go without a key\n", p.KeyEnv, p.Name)
	}

	fmt.Fprintln(w, "\nMODELS (prices in currency units per million tokens)")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  NAME\tPROVIDER\tUPSTREAM\tINPUT\tOUTPUT\tMAX OUTPUT TOKENS\tMAX IMAGE TOKENS\tMAX INPUT TOKENS\tDEFAULT")
	unpriced := false
	for _, m := range c.Models {
		in, out := formatAmount(m.InputMicrosPerMTok), formatAmount(m.OutputMicrosPerMTok)
		if m.InputMicrosPerMTok == 0 && m.OutputMicrosPerMTok == 0 {
			in, out, unpriced = "unpriced*", "unpriced*", true
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", m.Name, m.Provider, m.Upstream,
			in, out, m.MaxOutputTokens, m.MaxImageTokens, inputTokensText(m.MaxInputTokens), yesNoText(m.Default))
	}
	tw.Flush()
	if unpriced {
		// Not free: 0 and 0 would read so (docs/providers.md, "Prices and money").
		fmt.Fprintln(w, "  * no price: charged what the provider says it billed, or by the word (1,000 micros a word) when it says nothing")
	}
	if warns := c.Warnings; len(warns) > 0 {
		fmt.Fprintln(w, "\nWARNINGS")
		for _, x := range warns {
			fmt.Fprintln(w, "  "+x)
		}
	}
}

// inputTokensText is a model's max_input_tokens for a person: 0 is none
// named.
func inputTokensText(n int64) string {
	if n == 0 {
		return "-"
	}
	return strconv.FormatInt(n, 10)
}

// limitText is a provider limit for a person: 0 is unlimited.
func limitText(n int) string {
	if n == 0 {
		return "unlimited"
	}
	return strconv.Itoa(n)
}

func yesNoText(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
