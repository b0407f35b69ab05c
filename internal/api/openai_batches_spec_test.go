package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// openAISpecCases are the OpenAI surface's routes for the OpenAPI check
// (openapi_test.go): POST /v1/files, GET /v1/files/{id}[/content], the
// JSON form of POST /v1/batches, GET /v1/batches, POST …/cancel and GET
// …/errors, each with its success and error forms. ended is a batch whose
// one job failed (specEndedBatch); budgeted reserves 10 micros a word,
// and thrifty's budget is 100.
func openAISpecCases(t *testing.T, srv, budgeted *httptest.Server, operator, client, thrifty string, ended int64) []specCase {
	t.Helper()
	upload := func(srv *httptest.Server, token, purpose, content string) specCase {
		body, ct := uploadForm(t, purpose, "requests.jsonl", content)
		return specCase{srv: srv, method: "POST", path: "/v1/files", token: token, header: map[string]string{"Content-Type": ct}, body: body}
	}
	fileID := func(c specCase) string {
		t.Helper()
		_, resp, body := c.do(t)
		var f struct{ ID string }
		if err := json.Unmarshal(body, &f); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("upload: %d %s", resp.StatusCode, body)
		}
		return f.ID
	}
	const jobLine = `{"custom_id":"a","method":"POST","url":"/v1/jobs","body":{"prompt":"a haiku","max_words":50}}` + "\n"
	good := fileID(upload(srv, operator, "batch", jobLine))
	toCancel := fileID(upload(srv, operator, "batch", strings.Replace(jobLine, "haiku", "sonnet", 1)))
	bad := fileID(upload(srv, operator, "batch", jobLine+`{"custom_id":"b"}`+"\n"))
	dear := fileID(upload(budgeted, thrifty, "batch", jobLine))
	doomed := fileID(upload(srv, operator, "batch", jobLine))
	h := map[string]string{"Content-Type": "application/json"}
	create := func(fileID, metadata string) string {
		return fmt.Sprintf(`{"input_file_id":%q,"endpoint":"/v1/jobs","completion_window":"24h","metadata":%s}`, fileID, metadata)
	}
	_, resp, body := specCase{srv: srv, method: "POST", path: "/v1/batches", token: operator, header: h, body: create(toCancel, "null")}.do(t)
	var queued struct{ ID string }
	if err := json.Unmarshal(body, &queued); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("a batch to cancel: %d %s", resp.StatusCode, body)
	}

	endedID := fmt.Sprintf("batch_%d", ended)
	errorsFile := fmt.Sprintf("file-batch_%d-errors", ended)
	bodyNew, bodyOther, bodyBad := create(good, `{"run":"1"}`), create(good, `{"run":"2"}`), create(bad, "null")
	bodyNone, bodyDear := create("file-000000000000000000000000", "null"), create(dear, "null")
	tooMany := upload(srv, operator, "batch", strings.Repeat("{}\n", 50_001))
	cases := []specCase{
		withName(upload(srv, operator, "batch", jobLine), "POST /v1/files", "an upload", 200),
		withName(upload(srv, operator, "fine-tune", jobLine), "POST /v1/files", "another purpose", 400),
		withName(upload(srv, "", "batch", jobLine), "POST /v1/files", "no token", 401),
		withName(tooMany, "POST /v1/files", "over the line limit", 413),
		{"POST /v1/files", "not multipart", srv, "POST", "/v1/files", operator, map[string]string{"Content-Type": "application/json"}, `{}`, 415},

		{"GET /v1/files/{id}", "an upload", srv, "GET", "/v1/files/" + good, operator, nil, "", 200},
		{"GET /v1/files/{id}", "a batch's error file", srv, "GET", "/v1/files/" + errorsFile, operator, nil, "", 200},
		{"GET /v1/files/{id}", "no token", srv, "GET", "/v1/files/" + good, "", nil, "", 401},
		{"GET /v1/files/{id}", "another account's", srv, "GET", "/v1/files/" + good, client, nil, "", 404},
		{"GET /v1/files/{id}", "no such file", srv, "GET", "/v1/files/file-0", operator, nil, "", 404},
		{"GET /v1/files/{id}/content", "an upload", srv, "GET", "/v1/files/" + good + "/content", operator, nil, "", 200},
		{"GET /v1/files/{id}/content", "a batch's error file", srv, "GET", "/v1/files/" + errorsFile + "/content", operator, nil, "", 200},
		{"GET /v1/files/{id}/content", "another account's", srv, "GET", "/v1/files/" + good + "/content", client, nil, "", 404},

		{"GET /v1/files", "a page", srv, "GET", "/v1/files?limit=2", operator, nil, "", 200},
		{"GET /v1/files", "oldest first, after one", srv, "GET", "/v1/files?order=asc&after=" + good, operator, nil, "", 200},
		{"GET /v1/files", "one purpose", srv, "GET", "/v1/files?purpose=batch", client, nil, "", 200},
		{"GET /v1/files", "bad limit", srv, "GET", "/v1/files?limit=0", operator, nil, "", 400},
		{"GET /v1/files", "bad order", srv, "GET", "/v1/files?order=newest", operator, nil, "", 400},
		{"GET /v1/files", "after another account's file", srv, "GET", "/v1/files?after=" + good, client, nil, "", 404},
		{"GET /v1/files", "no token", srv, "GET", "/v1/files", "", nil, "", 401},
		{"DELETE /v1/files/{id}", "an upload", srv, "DELETE", "/v1/files/" + doomed, operator, nil, "", 200},
		{"DELETE /v1/files/{id}", "deleted before", srv, "DELETE", "/v1/files/" + doomed, operator, nil, "", 404},
		{"DELETE /v1/files/{id}", "another account's", srv, "DELETE", "/v1/files/" + good, client, nil, "", 404},
		{"DELETE /v1/files/{id}", "a batch's error file", srv, "DELETE", "/v1/files/" + errorsFile, operator, nil, "", 400},
		{"DELETE /v1/files/{id}", "no token", srv, "DELETE", "/v1/files/" + good, "", nil, "", 401},

		{"POST /v1/batches", "from a file", srv, "POST", "/v1/batches", operator, h, bodyNew, 200},
		{"POST /v1/batches", "from a file, re-sent", srv, "POST", "/v1/batches", operator, h, bodyNew, 200},
		{"POST /v1/batches", "the file again, other metadata", srv, "POST", "/v1/batches", operator, h, bodyOther, 422},
		{"POST /v1/batches", "a bad line in the file", srv, "POST", "/v1/batches", operator, h, bodyBad, 400},
		{"POST /v1/batches", "no such file", srv, "POST", "/v1/batches", operator, h, bodyNone, 404},
		{"POST /v1/batches", "a file over the budget", budgeted, "POST", "/v1/batches", thrifty, h, bodyDear, 402},

		{"GET /v1/batches", "a page", srv, "GET", "/v1/batches?limit=2", operator, nil, "", 200},
		{"GET /v1/batches", "the next page", srv, "GET", "/v1/batches?limit=2&after=" + queued.ID, client, nil, "", 200},
		{"GET /v1/batches", "bad limit", srv, "GET", "/v1/batches?limit=1000", operator, nil, "", 400},
		{"GET /v1/batches", "no token", srv, "GET", "/v1/batches", "", nil, "", 401},
		{"GET /v1/batches/{id}", "the OpenAI form", srv, "GET", "/v1/batches/" + endedID, operator, nil, "", 200},

		{"GET /v1/batches/{id}/errors", "a line", srv, "GET", "/v1/batches/" + endedID + "/errors", operator, nil, "", 200},
		{"GET /v1/batches/{id}/errors", "another account's", srv, "GET", "/v1/batches/" + endedID + "/errors", client, nil, "", 404},
		{"GET /v1/batches/{id}/errors", "bad id", srv, "GET", "/v1/batches/batch_/errors", operator, nil, "", 400},

		{"POST /v1/batches/{id}/cancel", "queued", srv, "POST", "/v1/batches/" + queued.ID + "/cancel", operator, nil, "", 200},
		{"POST /v1/batches/{id}/cancel", "re-sent", srv, "POST", "/v1/batches/" + queued.ID + "/cancel", operator, nil, "", 200},
		{"POST /v1/batches/{id}/cancel", "ended before", srv, "POST", "/v1/batches/" + endedID + "/cancel", operator, nil, "", 409},
		{"POST /v1/batches/{id}/cancel", "another account's", srv, "POST", "/v1/batches/" + endedID + "/cancel", client, nil, "", 404},
		{"POST /v1/batches/{id}/cancel", "bad id", srv, "POST", "/v1/batches/x/cancel", operator, nil, "", 400},
	}
	return cases
}

// withName names an upload case.
func withName(c specCase, pattern, name string, status int) specCase {
	c.pattern, c.name, c.status = pattern, name, status
	return c
}
