package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/catalog"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestModels_WithoutAConfigFile: serve's flags define one provider that
// runs any model name; GET /v1/models lists the default one and GET
// /v1/models/{name} finds any name, slashes and all, as a request naming
// it would run.
func TestModels_WithoutAConfigFile(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	s := api.New(api.Config{Store: st, Logger: storetest.TestLogger(t), Catalog: catalog.Single(catalog.Provider{Kind: catalog.KindSim}, "sim-default", 100)})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	get := func(path string, v any) int {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("GET %s: %s (%v)", path, b, err)
		}
		return resp.StatusCode
	}
	var list struct {
		Object string
		Data   []struct {
			ID      string `json:"id"`
			OwnedBy string `json:"owned_by"`
		}
	}
	if code := get("/v1/models", &list); code != 200 || list.Object != "list" || len(list.Data) != 1 || list.Data[0].ID != "sim-default" || list.Data[0].OwnedBy != "sim" {
		t.Errorf("GET /v1/models = %d %+v; want the one default model, owned by sim", code, list)
	}
	for _, name := range []string{"gpt-4o", "meta-llama/Llama-3.3-70B"} {
		var m struct {
			ID     string `json:"id"`
			Object string `json:"object"`
		}
		if code := get("/v1/models/"+name, &m); code != 200 || m.ID != name || m.Object != "model" {
			t.Errorf("GET /v1/models/%s = %d %+v; want it found", name, code, m)
		}
	}
}

// TestModels_ShowOnlyWhatARequestRuns: handleModelShow says it
// "answers a model the server would run a request of". Without a config
// file any name runs, but a request whose model is blank is refused
// (ParseChat: "model must be a model's name, a non-empty string"), so
// GET /v1/models/%20 must not answer 200 with a model " ".
func TestModels_ShowOnlyWhatARequestRuns(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	s := api.New(api.Config{Store: st, Logger: storetest.TestLogger(t), Catalog: catalog.Single(catalog.Provider{Kind: catalog.KindSim}, "sim-default", 100)})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	for _, path := range []string{"/v1/models/%20", "/v1/models/%09"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("GET %s = 200 %s; a request naming that model is refused (400), so it is not served", path, b)
		}
	}
}
