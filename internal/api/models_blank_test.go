package api_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/catalog"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

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
