package api

import (
	"net/http"
	"strings"

	"github.com/inkwell/inkwell"
)

// GET /v1/models and GET /v1/models/{model}: the OpenAI Models API over
// the catalog, so an SDK's models.list() and models.retrieve() name what
// this server serves (docs/api.md). A model's "created" is when this
// server started: the catalog is read then, and Inkwell knows nothing of
// when the provider made the model.

// modelObject is one model in the OpenAI form.
type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"` // "model"
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"` // the provider that serves it (its name in the config file)
}

// model is the model named name, served by owner, as this server shows it.
func (s *Server) model(name, owner string) modelObject {
	return modelObject{ID: name, Object: "model", Created: s.since, OwnedBy: owner}
}

func (s *Server) handleModelList(w http.ResponseWriter, r *http.Request) {
	data := []modelObject{}
	if c := s.cfg.Catalog; c != nil {
		for _, m := range c.Models {
			data = append(data, s.model(m.Name, m.Provider))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

// handleModelShow answers a model the server would run a request of:
// without a config file any name runs (on the one provider), so any name
// is found; with one, an unknown name is 404 listing the known ones.
func (s *Server) handleModelShow(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("model")
	if strings.TrimSpace(name) == "" { // a request naming it is refused (ParseChat): not served
		s.writeError(w, r, inkwell.Errorf(inkwell.ENOTFOUND, "model %q is not served here: a model's name is a non-empty string", name))
		return
	}
	c := s.cfg.Catalog
	if c == nil {
		writeJSON(w, http.StatusOK, s.model(name, "inkwell"))
		return
	}
	m, _, err := c.Lookup(name)
	if err != nil {
		s.writeError(w, r, inkwell.Errorf(inkwell.ENOTFOUND, "model %q is not served here; known models: %s", name, strings.Join(c.Names(), ", ")))
		return
	}
	writeJSON(w, http.StatusOK, s.model(name, m.Provider))
}
