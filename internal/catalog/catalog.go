// Package catalog owns what models exist, which provider serves each, what
// they cost and what each provider kind can carry (docs/providers.md). It
// is read from serve's config file (Load) or made from today's flags
// (Single), and asked by the API at accept (Check, WorstCase) and by the
// worker at each call (Route). It holds data only: the providers' HTTP
// clients are built from it in cmd/inkwell (Check asks the provider
// package's Anthropic mapping whether a request can be sent, no more).
package catalog

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/provider"
)

// Provider kinds.
const (
	KindOpenAI    = "openai"    // an OpenAI-compatible chat-completions API
	KindAnthropic = "anthropic" // Anthropic's Messages API
	KindSim       = "sim"       // the in-process simulator: answers any model, free of charge by default
)

// Kinds lists every provider kind.
var Kinds = []string{KindOpenAI, KindAnthropic, KindSim}

// Provider is one [[provider]] of the config file.
type Provider struct {
	Name        string
	Kind        string
	URL         string        // openai, anthropic: the API's base URL
	KeyEnv      string        // the environment variable holding its API key ("" for none)
	RPM, TPM    int           // its limits (0: unlimited); one limiter and one 429 pause per provider
	Timeout     time.Duration // bound on one call
	HonoursKeys bool          // a second call under the same idempotency key is not billed again
	Latency     time.Duration // sim: how long each call takes
	// LimitField is the name an openai provider reads the output limit
	// under ("max_tokens"); "" is max_completion_tokens, OpenAI's own.
	LimitField string
}

// PassesUnknownFields says whether a provider of this kind can carry a
// chat field Inkwell does not know: an OpenAI-compatible API is sent the
// body unchanged; Anthropic's Messages API has no place for one.
func (p Provider) PassesUnknownFields() bool { return p.Kind != KindAnthropic }

// Catalog is every model and provider serve knows.
type Catalog struct {
	Providers []Provider
	Models    []inkwell.Model
	// Default is the model a request that names none runs on (the short
	// form, or a chat request without "model").
	Default string
	// AnyModel, without a config file, runs a model of any name on the one
	// provider, sent upstream under the name the client gave.
	AnyModel bool
	// Path is the file it was read from ("" for flags).
	Path string
}

// Lookup finds a model by the name a client sends ("" is the default
// model) and the provider that serves it. An unknown name is EINVALID,
// listing the known ones.
func (c *Catalog) Lookup(name string) (inkwell.Model, Provider, error) {
	if name == "" {
		name = c.Default
	}
	for _, m := range c.Models {
		if m.Name == name {
			return m, c.provider(m.Provider), nil
		}
	}
	if c.AnyModel && len(c.Models) > 0 {
		m := c.Models[0]
		m.Name, m.Upstream = name, name
		return m, c.provider(m.Provider), nil
	}
	return inkwell.Model{}, Provider{}, inkwell.Errorf(inkwell.EINVALID, "model %q is not served here; known models: %s", name, strings.Join(c.Names(), ", "))
}

func (c *Catalog) provider(name string) Provider {
	i := slices.IndexFunc(c.Providers, func(p Provider) bool { return p.Name == name })
	if i < 0 {
		return Provider{}
	}
	return c.Providers[i]
}

// Names lists the models' names, in the file's order.
func (c *Catalog) Names() []string {
	out := make([]string, len(c.Models))
	for i, m := range c.Models {
		out[i] = m.Name
	}
	return out
}

// Check refuses a request its model cannot carry, before anything is
// written: an unknown model (listing the known ones), an output limit past
// the model's, a field the model's provider cannot carry (named). It
// returns the model the request runs on.
func (c *Catalog) Check(req inkwell.ChatRequest) (inkwell.Model, error) {
	m, p, err := c.Lookup(req.Model)
	if err != nil {
		return m, err
	}
	// Without a config file no model's bound is known: the flags' bound is
	// the default sent, not a limit on what a request may ask.
	if !c.AnyModel && m.MaxOutputTokens > 0 && req.MaxOutputTokens > m.MaxOutputTokens {
		return m, inkwell.Errorf(inkwell.EINVALID, "max_completion_tokens/max_tokens %d is more than model %q writes (max_output_tokens %d)", req.MaxOutputTokens, m.Name, m.MaxOutputTokens)
	}
	if !p.PassesUnknownFields() {
		if unknown := req.Unknown(); len(unknown) > 0 {
			return m, inkwell.Errorf(inkwell.EINVALID, "field %q is not one Inkwell knows, and model %q is served by %s provider %q, which cannot carry it (only OpenAI-compatible providers are sent unknown fields unchanged)",
				unknown[0], m.Name, p.Kind, p.Name)
		}
	}
	if p.Kind == KindAnthropic {
		if err := anthropicCarries(req, m); err != nil {
			return m, err
		}
	}
	if m.Priced() {
		if err := pricedAsConfigured(req, m); err != nil {
			return m, err
		}
	}
	return m, nil
}

// pricedAsConfigured refuses the members an OpenAI-compatible provider is
// sent unchanged that bill a call at prices the config file does not
// name: a service tier dearer than the default (OpenAI's "priority",
// "scale") and web search, billed by the search. Sent on a priced model,
// the provider would bill more than the usage at the model's prices,
// which is all Inkwell charges: the operator would pay the rest, with
// no cap to log it.
func pricedAsConfigured(req inkwell.ChatRequest, m inkwell.Model) error {
	if raw, ok := req.Fields["service_tier"]; ok && string(raw) != "null" {
		var tier string
		if json.Unmarshal(raw, &tier) != nil {
			return inkwell.Errorf(inkwell.EINVALID, "service_tier must be a string")
		}
		if !slices.Contains([]string{"auto", "default", "flex"}, tier) {
			return inkwell.Errorf(inkwell.EINVALID, "service_tier %q cannot be sent to model %q: the config file prices it at one tier's prices, and a dearer tier would be billed more than Inkwell charges (send \"auto\", \"default\" or \"flex\", or leave it out)", tier, m.Name)
		}
	}
	if raw, ok := req.Fields["web_search_options"]; ok && string(raw) != "null" {
		return inkwell.Errorf(inkwell.EINVALID, "web_search_options cannot be sent to model %q: a search is billed by the search, a price the config file does not name, on top of the tokens Inkwell charges", m.Name)
	}
	return nil
}

// anthropicCarries refuses the known chat fields the Messages API has no
// place for.
func anthropicCarries(req inkwell.ChatRequest, m inkwell.Model) error {
	switch {
	case req.Seed != nil:
		return inkwell.Errorf(inkwell.EINVALID, "field \"seed\" cannot be carried to model %q: Anthropic's Messages API has no seed", m.Name)
	case req.Temperature != nil && *req.Temperature > 1:
		return inkwell.Errorf(inkwell.EINVALID, "temperature %g cannot be carried to model %q: Anthropic's Messages API takes 0 to 1", *req.Temperature, m.Name)
	case req.ResponseFormat == "json_object" || req.ResponseFormat == "json_schema":
		return inkwell.Errorf(inkwell.EINVALID, "response_format %q cannot be carried to model %q: Anthropic's Messages API has no response format (ask for JSON in the prompt, or use a tool)", req.ResponseFormat, m.Name)
	}
	for _, t := range req.PartTypes() {
		if t != "text" && t != "refusal" && t != "image_url" {
			return inkwell.Errorf(inkwell.EINVALID, "a content part of type %q cannot be carried to model %q: Inkwell sends Anthropic's Messages API text and image_url parts only", t, m.Name)
		}
	}
	// The mapping itself (tools, tool_choice, images, turns), as the lane
	// will run it: what it cannot send is refused now, nothing written,
	// rather than stored, reserved and rejected when claimed.
	if err := provider.CheckMessages(req); err != nil {
		return inkwell.Errorf(inkwell.EINVALID, "model %q: %s", m.Name, err.Error())
	}
	return nil
}

// Single is the catalog of serve without a config file: one provider, of
// kind and name kind, and one default model that runs any name sent, as
// today's flags define them. maxOutput bounds an answer when a request
// names no limit.
func Single(p Provider, model string, maxOutput int) *Catalog {
	if p.Name == "" {
		p.Name = p.Kind
	}
	return &Catalog{
		Providers: []Provider{p},
		Models:    []inkwell.Model{{Name: model, Provider: p.Name, Upstream: model, MaxOutputTokens: maxOutput, ImageTokens: inkwell.DefaultImageTokens}},
		Default:   model,
		AnyModel:  true,
	}
}
