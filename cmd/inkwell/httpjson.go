package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/inkwell/inkwell"
)

// batchHTTP bounds each batch request: a server that hangs must not hang
// the command (the outcome is then unknown, and the key makes a re-send
// safe). The job commands go through the client package instead.
var batchHTTP = &http.Client{Timeout: 30 * time.Second}

// doJSON sends req with the token of INKWELL_TOKEN, if any; any answer
// other than 200/201 is an error carrying the server's message.
func doJSON(req *http.Request, out any) (int, error) {
	if tok := os.Getenv("INKWELL_TOKEN"); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := batchHTTP.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
		var e struct{ Error inkwell.Error }
		if json.Unmarshal(b, &e) == nil && e.Error.Code != "" {
			return resp.StatusCode, &e.Error
		}
		return resp.StatusCode, fmt.Errorf("server answered %s", resp.Status)
	}
	return resp.StatusCode, json.Unmarshal(b, out)
}
