// Package client is the Go client of Inkwell's HTTP API (docs/client.md).
//
// Submit sends a writing request under an idempotency key it generates
// (SubmitKey takes yours) and re-sends it, under the same key, when the
// outcome is unknown or the server asked to come back later: a network
// error (the connection refused, reset or cut before the answer), 429 and
// 503, honouring Retry-After, within a bounded number of tries and the
// context. The server answers a re-send with the job the first send made,
// so a re-send never makes a second job.
//
// Wait long-polls GET /v1/jobs/{id}?wait= until the job is done or failed,
// and keeps waiting across a server restart (connection refused, 503 while
// the server recovers) until its context ends. Get, Retry and Cancel
// complete the set. Every refusal is an *Error carrying the HTTP status and
// the JSON error code; OutcomeUnknown says whether a failed call may have
// taken effect.
//
//	c := client.New("http://127.0.0.1:8080", client.WithToken(os.Getenv("INKWELL_TOKEN")))
//	sub, err := c.Submit(ctx, inkwell.Request{Prompt: "a haiku about ink"})
//	if err != nil {
//		// sub.Key is set even here: re-send with c.SubmitKey(ctx, sub.Key, req)
//	}
//	d, err := c.Wait(ctx, sub.Job.ID)
//
// It imports the root inkwell package (the request and job types) and the
// standard library only.
package client
