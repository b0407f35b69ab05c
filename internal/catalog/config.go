package catalog

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/BurntSushi/toml"
	"github.com/inkwell/inkwell"
	"golang.org/x/text/unicode/norm"
)

// FileError is a config file refused: the file, the line at fault (0 when
// the fault is the whole file) and what is wrong and what to do about it.
type FileError struct {
	Path    string
	Line    int
	Message string
}

func (e *FileError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.Path, e.Line, e.Message)
	}
	return e.Path + ": " + e.Message
}

// DefaultTimeout bounds one provider call when a [[provider]] names no
// timeout.
const DefaultTimeout = 60 * time.Second

// MinTimeout is the shortest call bound a provider may have. A bound
// shorter than a provider takes to answer fails calls it is still
// answering, and may bill: a typo ("1ms" for "1m") would pay for every
// answer and keep none.
const MinTimeout = time.Second

// maxOutputTokens bounds max_output_tokens: Model.Cost counts at most 2^32
// tokens.
const maxOutputTokens = 1 << 32

// The keys each table takes, in the order docs/providers.md lists them.
var (
	providerKeys = []string{"name", "kind", "url", "key_env", "rpm", "tpm", "timeout", "honours_keys", "latency", "output_limit_field"}
	modelKeys    = []string{"name", "provider", "upstream", "input_micros_per_mtok", "output_micros_per_mtok", "max_output_tokens", "max_image_tokens", "max_input_tokens"}
	topKeys      = []string{"default_model", "provider", "model"}
)

// Load reads serve's config file (docs/providers.md) and refuses a bad one
// with a *FileError naming the line. It reads nothing else: an API key's
// variable is named, never read, and an unset one is no error here.
func Load(path string) (*Catalog, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config file: %w", err)
	}
	return Parse(path, data)
}

// Parse is Load of a file already read; name is the file's name, used in
// errors and as the Catalog's Path.
func Parse(name string, data []byte) (*Catalog, error) {
	var doc struct {
		DefaultModel any `toml:"default_model"`
		Provider     any `toml:"provider"`
		Model        any `toml:"model"`
	}
	md, err := toml.Decode(string(data), &doc)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, &FileError{Path: name, Line: pe.Position.Line,
				Message: "not valid TOML: " + pe.Message + " (fix the syntax on this line; the format is at https://toml.io)"}
		}
		return nil, &FileError{Path: name, Message: err.Error()}
	}
	r := &reader{path: name, pos: findPositions(data, md)}
	if err := r.unknownTop(md); err != nil {
		return nil, err
	}
	providers, err := r.tables("provider", doc.Provider)
	if err != nil {
		return nil, err
	}
	models, err := r.tables("model", doc.Model)
	if err != nil {
		return nil, err
	}
	c := &Catalog{Path: name}
	for _, e := range providers {
		p, err := r.provider(e, c.Providers)
		if err != nil {
			return nil, err
		}
		c.Providers = append(c.Providers, p)
	}
	for _, e := range models {
		m, err := r.model(e, c)
		if err != nil {
			return nil, err
		}
		c.Models = append(c.Models, m)
	}
	if len(c.Models) == 0 {
		return nil, r.errAt(0, "no [[model]]: add at least one, naming a [[provider]] (docs/providers.md)")
	}
	if c.Default, err = r.defaultModel(doc.DefaultModel, c); err != nil {
		return nil, err
	}
	return c, nil
}

// reader turns the decoded file into a Catalog, naming the line of each
// fault.
type reader struct {
	path string
	pos  positions
}

// unknownTop refuses a top-level key other than default_model, provider
// and model, written in any form. The tables are decoded as plain values, so all their keys are
// undecoded too: provider and model check their own.
func (r *reader) unknownTop(md toml.MetaData) error {
	for _, k := range md.Undecoded() {
		if len(k) > 1 && slices.Contains(topKeys, k[0]) {
			continue // a key of a table this file takes: that table checks it
		}
		// Any other first part is refused, however it was written: plainly,
		// dotted (limits.rpm = 500) or as a table's header ([server.http]),
		// whose parent the decoder does not list as undecoded.
		hint := ""
		if near := nearest(k[0], topKeys); near != "" {
			hint = fmt.Sprintf("did you mean %q? ", near)
		}
		return r.errAt(r.pos.top[k[0]], "unknown key %q: %sthe file's top level takes default_model, then [[provider]] and [[model]] tables", k[0], hint)
	}
	return nil
}

func (r *reader) errAt(line int, format string, args ...any) error {
	return &FileError{Path: r.path, Line: line, Message: fmt.Sprintf(format, args...)}
}

// tables returns the [[kind]] tables, refusing any other shape.
func (r *reader) tables(kind string, v any) ([]entry, error) {
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]map[string]any)
	if !ok {
		hint := ""
		if _, single := v.(map[string]any); single {
			hint = fmt.Sprintf(" (write [[%s]] with two brackets: [%s] is a single table)", kind, kind)
		}
		return nil, r.errAt(r.pos.top[kind], "%s must be [[%s]] tables, not %s%s", kind, kind, typeName(v), hint)
	}
	out := make([]entry, len(list))
	for i, fields := range list {
		out[i] = entry{r: r, kind: kind, index: i, fields: fields}
	}
	return out, nil
}

// provider reads one [[provider]]; before holds the ones above it.
func (r *reader) provider(e entry, before []Provider) (Provider, error) {
	if err := e.unknownKeys(providerKeys); err != nil {
		return Provider{}, err
	}
	var p Provider
	var err error
	if p.Name, err = e.name(); err != nil {
		return p, err
	}
	// Names are matched exactly; two that differ only in case would be
	// two providers that every log and listing makes look like one.
	if i := slices.IndexFunc(before, func(q Provider) bool { return lookAlike(q.Name, p.Name) }); i >= 0 {
		return p, e.errorf("name", "name %q is already [[provider]] #%d (line %d)%s: give each provider its own name", p.Name, i+1, r.pos.line("provider", i, "name"), inAnotherCase(p.Name, before[i].Name))
	}
	if err := r.providerKind(e, &p); err != nil {
		return p, err
	}
	if err := r.providerEndpoint(e, &p); err != nil {
		return p, err
	}
	if err := r.outputLimitField(e, &p); err != nil {
		return p, err
	}
	return p, r.providerLimits(e, &p)
}

// OutputLimitFields are the names an OpenAI-compatible API may read an
// answer's output limit under: OpenAI's own (the default; its reasoning
// models refuse the other), and the older one that Mistral and Azure's
// older API versions read, refusing the newer as an unknown field.
var OutputLimitFields = []string{"max_completion_tokens", "max_tokens"}

// outputLimitField reads output_limit_field: the name the answer's limit
// goes out under to an openai provider.
func (r *reader) outputLimitField(e entry, p *Provider) error {
	field, ok, err := e.str("output_limit_field")
	switch {
	case err != nil || !ok:
		return err
	case p.Kind != KindOpenAI:
		return e.errorf("output_limit_field", "output_limit_field is for kind \"openai\" only: %s sends its own limit (remove it)", p.Kind)
	case !slices.Contains(OutputLimitFields, field):
		return e.errorf("output_limit_field", "output_limit_field %q is not one an OpenAI-compatible API reads: use %s", field, strings.Join(quoteEach(OutputLimitFields), " or "))
	}
	p.LimitField = field
	return nil
}

func (r *reader) providerKind(e entry, p *Provider) error {
	kind, ok, err := e.str("kind")
	switch {
	case err != nil:
		return err
	case !ok:
		return e.errorf("", "kind is missing: add kind = %s", strings.Join(quoteEach(Kinds), " | "))
	case !slices.Contains(Kinds, kind):
		return e.errorf("kind", "kind %q is not one Inkwell knows: use %s", kind, strings.Join(quoteEach(Kinds), ", "))
	}
	p.Kind = kind
	return nil
}

// providerEndpoint reads url and key_env: where an HTTP provider is and
// which variable holds its key. The sim has neither.
func (r *reader) providerEndpoint(e entry, p *Provider) error {
	u, hasURL, err := e.str("url")
	if err != nil {
		return err
	}
	keyEnv, hasKey, err := e.str("key_env")
	if err != nil {
		return err
	}
	if p.Kind == KindSim {
		switch {
		case hasURL:
			return e.errorf("url", "url is for openai and anthropic providers: a sim runs inside serve (remove it, or set kind to the API's kind)")
		case hasKey:
			return e.errorf("key_env", "key_env is for openai and anthropic providers: a sim needs no key (remove it)")
		}
		return nil
	}
	if !hasURL {
		return e.errorf("", "url is missing: kind %q needs the API's base URL, such as %q", p.Kind, exampleURL(p.Kind))
	}
	if err := checkURL(u); err != nil {
		return e.errorf("url", "url %s %v: give the API's base URL, such as %q", shownURL(u), err, exampleURL(p.Kind))
	}
	// The value is not quoted back: a key written here by mistake must not
	// reach a log.
	if hasKey && (!envName.MatchString(keyEnv) || looksLikeKey(keyEnv)) {
		return e.errorf("key_env", "key_env must name the environment variable that holds the API key (letters, digits and _, such as %s), never the key itself", exampleKeyEnv(p.Kind))
	}
	p.URL, p.KeyEnv = u, keyEnv
	return nil
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// looksLikeKey says a key_env value made only of a variable name's
// characters is an API key all the same, which serve would print when the
// variable is unset: a provider's key prefix (Groq's gsk_, Stripe-style
// sk_), or a long run mixing upper and lower case with digits, as random
// keys do (Mistral's 32 characters) and variable names do not
// (OPENAI_API_KEY, openai_key_2).
func looksLikeKey(s string) bool {
	for _, prefix := range []string{"gsk_", "sk_", "xai_", "pk_"} {
		if strings.HasPrefix(strings.ToLower(s), prefix) && len(s) > 20 {
			return true
		}
	}
	upper := strings.ContainsFunc(s, func(r rune) bool { return r >= 'A' && r <= 'Z' })
	lower := strings.ContainsFunc(s, func(r rune) bool { return r >= 'a' && r <= 'z' })
	digit := strings.ContainsFunc(s, func(r rune) bool { return r >= '0' && r <= '9' })
	if len(s) >= 24 && upper && lower && digit {
		return true
	}
	// A long run of letters and digits with no _ between words, in one
	// case: a hex or base-32 key (64 hex characters), not a name.
	return len(s) >= 32 && !strings.Contains(s, "_") && (upper || lower) && digit
}

func checkURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return errors.New("is not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("is not an http:// or https:// URL")
	case u.Host == "":
		return errors.New("has no host")
	case u.User != nil:
		return errors.New("holds credentials (put the key in the variable key_env names)")
	case u.RawQuery != "" || u.ForceQuery:
		return errors.New("has a query (?...): a provider's URL is its API's base, to which Inkwell adds the path it calls, and serve logs it (a key goes in the variable key_env names)")
	case u.Fragment != "":
		return errors.New("has a fragment (#...): a provider's URL is its API's base, and a fragment is never sent")
	}
	return nil
}

// shownURL is a refused url as its error quotes it. A key written there by
// mistake must reach no log: a user, a password, a query or a fragment is
// shown as xxxxx; a value that is no URL with a host is quoted only when
// it looks like a host or a URL (a '.', ':' or '/', and no '@', '?' or '#'),
// since a key pasted into url has none of these.
func shownURL(s string) string {
	const hidden = "(not shown: it may hold a key)"
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		if strings.ContainsAny(s, "@?#") || !strings.ContainsAny(s, ".:/") {
			return hidden
		}
		return fmt.Sprintf("%q", s)
	}
	if u.User != nil {
		u.User = url.User("xxxxx")
	}
	if u.RawQuery != "" || u.ForceQuery {
		u.RawQuery, u.ForceQuery = "xxxxx", false
	}
	if u.Fragment != "" {
		u.Fragment, u.RawFragment = "xxxxx", ""
	}
	return fmt.Sprintf("%q", u.String())
}

func exampleURL(kind string) string {
	if kind == KindAnthropic {
		return "https://api.anthropic.com"
	}
	return "https://api.openai.com"
}

func exampleKeyEnv(kind string) string {
	if kind == KindAnthropic {
		return "ANTHROPIC_API_KEY"
	}
	return "OPENAI_API_KEY"
}

// providerLimits reads rpm, tpm, timeout, honours_keys and latency,
// filling their defaults.
func (r *reader) providerLimits(e entry, p *Provider) error {
	var err error
	if p.RPM, err = e.limit("rpm", "calls a minute"); err != nil {
		return err
	}
	if p.TPM, err = e.limit("tpm", "tokens a minute"); err != nil {
		return err
	}
	timeout, ok, err := e.duration("timeout")
	switch {
	case err != nil:
		return err
	case !ok:
		timeout = DefaultTimeout
	case timeout < MinTimeout:
		return e.errorf("timeout", "timeout %s must be at least %s: it bounds each call to the provider, and a call cut off while the provider answers may still be billed (absent: %s)", timeout, MinTimeout, DefaultTimeout)
	}
	p.Timeout = timeout
	honours, ok, err := e.boolean("honours_keys")
	switch {
	case err != nil:
		return err
	case !ok:
		honours = p.Kind == KindSim
	case honours && p.Kind == KindAnthropic:
		return e.errorf("honours_keys", "honours_keys = true is refused for an anthropic provider: Anthropic's API honours no idempotency key, so a call sent again may be billed again (remove the line)")
	}
	p.HonoursKeys = honours
	latency, ok, err := e.duration("latency")
	switch {
	case err != nil || !ok:
		return err
	case p.Kind != KindSim:
		return e.errorf("latency", "latency is for kind \"sim\" only: kind %q takes as long as its API does (remove it)", p.Kind)
	case latency < 0:
		return e.errorf("latency", "latency %s is negative: give how long each sim call takes, 0 or more", latency)
	}
	p.Latency = latency
	return nil
}

// model reads one [[model]]; c holds the providers and the models above it.
func (r *reader) model(e entry, c *Catalog) (inkwell.Model, error) {
	if err := e.unknownKeys(modelKeys); err != nil {
		return inkwell.Model{}, err
	}
	var m inkwell.Model
	var err error
	if m.Name, err = e.name(); err != nil {
		return m, err
	}
	// Matched exactly, as requests name them: "GPT-4o" beside "gpt-4o"
	// would be a second model a typo in a request's case picks silently.
	if i := slices.IndexFunc(c.Models, func(o inkwell.Model) bool { return lookAlike(o.Name, m.Name) }); i >= 0 {
		return m, e.errorf("name", "name %q is already [[model]] #%d (line %d)%s: give each model its own name", m.Name, i+1, r.pos.line("model", i, "name"), inAnotherCase(m.Name, c.Models[i].Name))
	}
	if m.Provider, err = r.modelProvider(e, c.Providers); err != nil {
		return m, err
	}
	upstream, ok, err := e.str("upstream")
	switch {
	case err != nil:
		return m, err
	case !ok:
		upstream = m.Name
	case upstream == "":
		return m, e.errorf("upstream", "upstream is empty: give the model's name at the provider, or remove the line to send %q", m.Name)
	case strings.ContainsFunc(upstream, unicode.IsControl):
		// Logged and printed by inkwell models: a newline there would
		// forge a line of their output.
		return m, e.errorf("upstream", "upstream holds a control character (a newline, a tab…): give the model's name at the provider on one line")
	}
	m.Upstream = upstream
	if m.InputMicrosPerMTok, err = e.price("input_micros_per_mtok", "prompt"); err != nil {
		return m, err
	}
	if m.OutputMicrosPerMTok, err = e.price("output_micros_per_mtok", "completion"); err != nil {
		return m, err
	}
	if m.MaxOutputTokens, err = r.maxOutput(e); err != nil {
		return m, err
	}
	if m.ImageTokens, err = r.imageTokens(e); err != nil {
		return m, err
	}
	if m.InputTokens, err = r.inputTokens(e); err != nil {
		return m, err
	}
	// A bound that alone costs more than any job may would have every
	// request naming no limit refused at accept.
	if m.Cost(0, int64(m.MaxOutputTokens)) > inkwell.MaxChargeMicros {
		most := int64(inkwell.MaxChargeMicros) / m.OutputMicrosPerMTok * 1_000_000
		return m, e.errorf("max_output_tokens", "max_output_tokens %d at output_micros_per_mtok %d costs more than any job may (%d micros, a million units), so every request naming no limit would be refused: give at most %d, or check the price is per million tokens",
			m.MaxOutputTokens, m.OutputMicrosPerMTok, int64(inkwell.MaxChargeMicros), most)
	}
	// The same for a whole window: every request with a part only the
	// window sizes (a file) would be refused.
	if m.InputTokens > 0 && m.Cost(m.InputTokens, int64(m.MaxOutputTokens)) > inkwell.MaxChargeMicros {
		return m, e.errorf("max_input_tokens", "max_input_tokens %d at input_micros_per_mtok %d (with max_output_tokens %d) costs more than any job may (%d micros, a million units), so every request with a file part would be refused: give the model's real context window, or check the price is per million tokens",
			m.InputTokens, m.InputMicrosPerMTok, m.MaxOutputTokens, int64(inkwell.MaxChargeMicros))
	}
	return m, nil
}

func (r *reader) modelProvider(e entry, providers []Provider) (string, error) {
	name, ok, err := e.str("provider")
	if err != nil {
		return "", err
	}
	names := make([]string, len(providers))
	for i, p := range providers {
		names[i] = p.Name
	}
	known := "the file has no [[provider]]: add one"
	if len(names) > 0 {
		known = "known providers: " + strings.Join(quoteEach(names), ", ")
	}
	if !ok {
		return "", e.errorf("", "provider is missing: name the [[provider]] that serves this model (%s)", known)
	}
	if !slices.Contains(names, name) {
		return "", e.errorf("provider", "provider %q is not a [[provider]] of this file (%s)", name, known)
	}
	return name, nil
}

func (r *reader) maxOutput(e entry) (int, error) {
	n, ok, err := e.integer("max_output_tokens")
	switch {
	case err != nil:
		return 0, err
	case !ok:
		return 0, e.errorf("", "max_output_tokens is missing: add the most tokens one answer of this model may write (such as 16384)")
	case n < 1 || n > maxOutputTokens || n > math.MaxInt:
		return 0, e.errorf("max_output_tokens", "max_output_tokens %d is out of range: give the most tokens one answer may write, from 1 to %d", n, int64(maxOutputTokens))
	}
	return int(n), nil
}

// imageTokens reads max_image_tokens: the most prompt tokens one image
// part may cost beyond its bytes (inkwell.Model.ImageTokens).
func (r *reader) imageTokens(e entry) (int64, error) {
	n, ok, err := e.integer("max_image_tokens")
	switch {
	case err != nil:
		return 0, err
	case !ok:
		return inkwell.DefaultImageTokens, nil
	case n < 0 || n > inkwell.MaxImageTokens:
		return 0, e.errorf("max_image_tokens", "max_image_tokens %d is out of range: give the most prompt tokens one image may cost on this model as its provider documents it (such as 1445), from 0 to %d", n, int64(inkwell.MaxImageTokens))
	}
	return n, nil
}

// inputTokens reads max_input_tokens: the most prompt tokens the model's
// provider bills for one request, its context window
// (inkwell.Model.InputTokens); 0 when the file names none.
func (r *reader) inputTokens(e entry) (int64, error) {
	n, ok, err := e.integer("max_input_tokens")
	switch {
	case err != nil:
		return 0, err
	case !ok:
		return 0, nil
	case n < 1 || n > inkwell.MaxInputTokens:
		return 0, e.errorf("max_input_tokens", "max_input_tokens %d is out of range: give the model's context window as its provider documents it (such as 128000), from 1 to %d, or remove the line", n, int64(inkwell.MaxInputTokens))
	}
	return n, nil
}

func (r *reader) defaultModel(v any, c *Catalog) (string, error) {
	if v == nil {
		return c.Models[0].Name, nil
	}
	line := r.pos.top["default_model"]
	name, ok := v.(string)
	if !ok {
		return "", r.errAt(line, "default_model must be a string naming a [[model]], not %s", typeName(v))
	}
	if !slices.Contains(c.Names(), name) {
		return "", r.errAt(line, "default_model %q is not a [[model]] of this file: use one of %s, or remove the line to default to the first", name, strings.Join(quoteEach(c.Names()), ", "))
	}
	return name, nil
}

// entry is one [[provider]] or [[model]] table as decoded.
type entry struct {
	r      *reader
	kind   string // "provider" or "model"
	index  int    // from 0, in the file's order
	fields map[string]any
}

// where names the table for a person: [[model]] #2 "claude-x".
func (e entry) where() string {
	s := fmt.Sprintf("[[%s]] #%d", e.kind, e.index+1)
	if name, ok := e.fields["name"].(string); ok && name != "" {
		s += fmt.Sprintf(" %q", name)
	}
	return s
}

// errorf refuses the table at key's line ("" or a key it lacks: the
// table's header).
func (e entry) errorf(key, format string, args ...any) error {
	return e.r.errAt(e.r.pos.line(e.kind, e.index, key), "%s: %s", e.where(), fmt.Sprintf(format, args...))
}

// unknownKeys refuses a key the table does not take, the first in the
// file, suggesting the key meant.
func (e entry) unknownKeys(known []string) error {
	var bad []string
	for k := range e.fields {
		if !slices.Contains(known, k) {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	slices.SortFunc(bad, func(a, b string) int {
		if d := e.r.pos.line(e.kind, e.index, a) - e.r.pos.line(e.kind, e.index, b); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	hint := ""
	if near := nearest(bad[0], known); near != "" {
		hint = fmt.Sprintf("did you mean %q? ", near)
	}
	return e.errorf(bad[0], "unknown key %q: %sa [[%s]] takes %s", bad[0], hint, e.kind, strings.Join(known, ", "))
}

// name reads the required, non-empty name.
// invisible reports a character Unicode says to draw as nothing (its
// Default_Ignorable_Code_Point set): format characters such as U+200B,
// variation selectors, the combining grapheme joiner, Hangul fillers.
func invisible(r rune) bool {
	return unicode.In(r, unicode.Cf, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector)
}

// lookAlike reports two names a reader cannot tell apart: the same but
// for case, or for how an accented letter is written (é as one code
// point, or as e and a combining accent: NFC against NFD, as a file
// edited on macOS may hold).
func lookAlike(a, b string) bool {
	return strings.EqualFold(norm.NFC.String(a), norm.NFC.String(b))
}

// inAnotherCase says how an earlier name differs from name when only case
// or the accents' encoding tells them apart ("" when they are the same).
func inAnotherCase(name, earlier string) string {
	if name == earlier {
		return ""
	}
	return fmt.Sprintf(", written %q: names that differ only in case, or in how an accent is encoded, are refused", earlier)
}

func (e entry) name() (string, error) {
	name, ok, err := e.str("name")
	switch {
	case err != nil:
		return "", err
	case !ok:
		return "", e.errorf("", "name is missing: add name = \"...\" (unique among the [[%s]] tables)", e.kind)
	case name == "" || strings.TrimSpace(name) != name || strings.ContainsFunc(name, unicode.IsControl):
		return "", e.errorf("name", "name %q must be non-empty, without spaces around it or control characters", name)
	case strings.ContainsFunc(name, invisible):
		// A zero-width space or joiner: "m\u200b" reads as "m" in every
		// log and listing, and is another model.
		return "", e.errorf("name", "name %q holds an invisible character (a zero-width space, joiner or mark): it would read as another name", name)
	}
	return name, nil
}

func (e entry) str(key string) (string, bool, error) {
	v, ok := e.fields[key]
	if !ok {
		return "", false, nil
	}
	s, isStr := v.(string)
	if !isStr {
		return "", true, e.errorf(key, "%s must be a string in quotes, not %s", key, typeName(v))
	}
	return s, true, nil
}

func (e entry) integer(key string) (int64, bool, error) {
	v, ok := e.fields[key]
	if !ok {
		return 0, false, nil
	}
	n, isInt := v.(int64)
	if !isInt {
		return 0, true, e.errorf(key, "%s must be a whole number, not %s", key, typeName(v))
	}
	return n, true, nil
}

func (e entry) boolean(key string) (bool, bool, error) {
	v, ok := e.fields[key]
	if !ok {
		return false, false, nil
	}
	b, isBool := v.(bool)
	if !isBool {
		return false, true, e.errorf(key, "%s must be true or false, not %s", key, typeName(v))
	}
	return b, true, nil
}

// duration reads a Go duration string such as "60s" or "1m30s".
func (e entry) duration(key string) (time.Duration, bool, error) {
	v, ok := e.fields[key]
	if !ok {
		return 0, false, nil
	}
	s, isStr := v.(string)
	if !isStr {
		return 0, true, e.errorf(key, "%s must be a duration in quotes, such as \"60s\" or \"1m30s\", not %s", key, typeName(v))
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, true, e.errorf(key, "%s %q is not a duration: write it as \"60s\", \"1m30s\" or \"500ms\"", key, s)
	}
	return d, true, nil
}

// limit reads rpm or tpm: 0 or absent is unlimited.
func (e entry) limit(key, unit string) (int, error) {
	n, _, err := e.integer(key)
	switch {
	case err != nil:
		return 0, err
	case n < 0 || n > math.MaxInt32:
		return 0, e.errorf(key, "%s %d is out of range: give the provider's limit in %s, or 0 (or no line) for unlimited", key, n, unit)
	}
	return int(n), nil
}

// price reads a price per million tokens, in micros. 0 or absent is no
// price: a model with neither price is charged what its provider says it
// billed (docs/providers.md, "Prices and money"), not nothing.
func (e entry) price(key, tokens string) (int64, error) {
	v, ok := e.fields[key]
	if f, isFloat := v.(float64); ok && isFloat {
		return 0, e.errorf(key, "%s is in micros (millionths of the currency unit), a whole number: %g units a million tokens is %s = %.0f", key, f, key, f*1e6)
	}
	n, _, err := e.integer(key)
	switch {
	case err != nil:
		return 0, err
	case n < 0:
		return 0, e.errorf(key, "%s %d is negative: give the price of a million %s tokens in micros, 0 or more (150000 is 0.15 units)", key, n, tokens)
	case n > inkwell.MaxPriceMicrosPerMTok:
		return 0, e.errorf(key, "%s %d is more than %d (%d units a million tokens): give the price in micros, millionths of the currency unit (150000 is 0.15 units)",
			key, n, int64(inkwell.MaxPriceMicrosPerMTok), int64(inkwell.MaxPriceMicrosPerMTok/1_000_000))
	}
	return n, nil
}

// typeName names a decoded TOML value's type for a person.
func typeName(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "a whole number"
	case float64:
		return "a number with a fraction"
	case bool:
		return "true or false"
	case []map[string]any:
		return "[[...]] tables"
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	case time.Time:
		return "a date or time"
	}
	return fmt.Sprintf("a %T", v)
}

func quoteEach(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = fmt.Sprintf("%q", n)
	}
	return out
}

// nearest is the known key a misspelt one most likely means, or "".
func nearest(key string, known []string) string {
	best, bestDist := "", max(2, len(key)/4)+1
	for _, k := range known {
		if d := editDistance(key, k); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// positions is the line of each key of the file. The TOML library gives a
// line for syntax errors only, and keeps one line per dotted key name, so
// the keys of the second [[model]] would point at the first's.
type positions struct {
	top     map[string]int              // top-level key -> its line
	headers map[string][]int            // "model" -> the line of each [[model]]
	keys    map[string][]map[string]int // "model" -> per [[model]], key -> its line
}

// line is the line of key in the index-th [[kind]] table, or of the
// table's header when key is "" or absent (0 when unknown).
func (p positions) line(kind string, index int, key string) int {
	if index < len(p.keys[kind]) {
		if l, ok := p.keys[kind][index][key]; ok {
			return l
		}
	}
	if index < len(p.headers[kind]) {
		return p.headers[kind][index]
	}
	return p.top[kind]
}

// findPositions finds each key of md.Keys() (in the file's order) by
// scanning forward through the file with comments and string values
// blanked out, so a key is found only where it is written as a key.
func findPositions(data []byte, md toml.MetaData) positions {
	p := positions{top: map[string]int{}, headers: map[string][]int{}, keys: map[string][]map[string]int{}}
	text := maskValues(data)
	cur, line := 0, 1
	for _, k := range md.Keys() {
		var re *regexp.Regexp
		if len(k) == 1 && md.Type(k...) == "ArrayHash" {
			re = regexp.MustCompile(`\[\[[ \t]*` + keyPattern(k[0]) + `[ \t]*\]\]`)
		} else {
			re = regexp.MustCompile(`(?m)(?:^|[ \t{,.\[])` + keyPattern(k[len(k)-1]) + `[ \t]*[=.\]]`)
		}
		loc := re.FindSubmatchIndex(text[cur:])
		if loc == nil {
			continue // not where expected: errors fall back to the table's header
		}
		at := cur + loc[2]
		line += bytes.Count(data[cur:at], []byte("\n"))
		cur = cur + loc[3]
		if _, seen := p.top[k[0]]; !seen { // a dotted key's first line is its top key's
			p.top[k[0]] = line
		}
		switch tables := p.keys[k[0]]; {
		case len(k) == 1 && md.Type(k...) == "ArrayHash":
			p.headers[k[0]] = append(p.headers[k[0]], line)
			p.keys[k[0]] = append(tables, map[string]int{})
		case len(k) > 1 && len(tables) > 0:
			if _, seen := tables[len(tables)-1][k[1]]; !seen {
				tables[len(tables)-1][k[1]] = line
			}
		}
	}
	return p
}

// keyPattern matches key written bare or quoted, as group 1.
func keyPattern(key string) string {
	q := regexp.QuoteMeta(key)
	return `(` + q + `|"` + q + `"|'` + q + `')`
}

// maskValues returns a copy of data, newlines kept, with every comment and
// every string that is not a key replaced by spaces.
func maskValues(data []byte) []byte {
	out := slices.Clone(data)
	blank := func(from, to int) {
		for i := from; i < to; i++ {
			if out[i] != '\n' {
				out[i] = ' '
			}
		}
	}
	for i := 0; i < len(data); {
		switch data[i] {
		case '#':
			end := len(data)
			if n := bytes.IndexByte(data[i:], '\n'); n >= 0 {
				end = i + n
			}
			blank(i, end)
			i = end
		case '"', '\'':
			end := stringEnd(data, i)
			if !followedByKeyEnd(data, end) {
				blank(i, end)
			}
			i = end
		default:
			i++
		}
	}
	return out
}

// stringEnd is the offset just past the TOML string that opens at i.
func stringEnd(data []byte, i int) int {
	q := data[i]
	delim := []byte{q}
	if triple := []byte{q, q, q}; bytes.HasPrefix(data[i:], triple) {
		delim = triple
	}
	for j := i + len(delim); j < len(data); j++ {
		switch {
		case q == '"' && data[j] == '\\':
			j++ // an escaped character ends nothing
		case len(delim) == 1 && data[j] == '\n':
			return j
		case bytes.HasPrefix(data[j:], delim):
			end := j + len(delim)
			for len(delim) == 3 && end < len(data) && data[end] == q { // """a"""" ends with a quote inside
				end++
			}
			return end
		}
	}
	return len(data)
}

// followedByKeyEnd says whether a string ending at i is a key: "=" or a
// dotted key's "." comes next.
func followedByKeyEnd(data []byte, i int) bool {
	for ; i < len(data) && (data[i] == ' ' || data[i] == '\t'); i++ {
	}
	return i < len(data) && (data[i] == '=' || data[i] == '.')
}
