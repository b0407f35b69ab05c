package main

import (
	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/catalog"
	"github.com/inkwell/inkwell/internal/provider"
	"github.com/inkwell/inkwell/internal/worker"
)

// Routes is serve's models and the providers that serve them: the catalog
// (from --config, or today's flags) and, per provider, its client and its
// limiter. The worker asks it where each job goes (worker.Router); the API
// asks the catalog what a request may be and what it reserves.
type Routes struct {
	Catalog *catalog.Catalog
	// byProvider holds each provider's client, limiter and key promise,
	// by the provider's name; Route adds the model.
	byProvider map[string]worker.Route
	limiters   []worker.Limiter
}

var _ worker.Router = (*Routes)(nil)

// AddProvider sets the client and limiter of catalog provider p.
func (r *Routes) AddProvider(p catalog.Provider, client inkwell.Provider, lim worker.Limiter) {
	if r.byProvider == nil {
		r.byProvider = map[string]worker.Route{}
	}
	r.byProvider[p.Name] = worker.Route{Provider: client, Limiter: lim, HonoursKeys: p.HonoursKeys}
	if lim != nil {
		r.limiters = append(r.limiters, lim)
	}
}

// Route is where a job naming model goes ("" the default model).
func (r *Routes) Route(model string) (worker.Route, error) {
	m, p, err := r.Catalog.Lookup(model)
	if err != nil {
		return worker.Route{}, err
	}
	rt := r.byProvider[p.Name]
	rt.Model = m
	return rt, nil
}

// Limiters is every provider's limiter.
func (r *Routes) Limiters() []worker.Limiter { return r.limiters }

// WorstCase is what work reserves on model m (provider.WorstCaseMicros for
// m's provider).
func (r *Routes) WorstCase(w inkwell.Work, m inkwell.Model) int64 {
	return provider.WorstCaseMicros(r.byProvider[m.Provider].Provider, m, w)
}

// singleRoutes is the routes of serve without a config file: the one
// provider its flags define (kind name), serving any model name, its
// default model the provider's own (--model, or provider.DefaultModel),
// answers bounded as the short form's longest.
func singleRoutes(kind string, prov inkwell.Provider, lim worker.Limiter, honoursKeys bool) *Routes {
	model := provider.DefaultModel
	if o, ok := prov.(*provider.OpenAI); ok {
		model = o.Model()
	}
	p := catalog.Provider{Name: kind, Kind: kind, HonoursKeys: honoursKeys}
	r := &Routes{Catalog: catalog.Single(p, model, inkwell.MaxMaxWords*inkwell.TokensPerWord)}
	r.AddProvider(p, prov, lim)
	return r
}
