// Package client is the Go client of Inkwell's HTTP API (docs/client.md):
// Submit re-sends under the same idempotency key when the outcome is
// unknown, so a re-send never makes a second job; Wait long-polls a job to
// its end, across a server restart. It imports the root package and the
// standard library only.
//
//	c := client.New("http://127.0.0.1:8080", client.WithToken(os.Getenv("INKWELL_TOKEN")))
//	sub, err := c.Submit(ctx, inkwell.Request{Prompt: "a haiku about ink"})
//	if err != nil {
//		// sub.Key is set even here: re-send with c.SubmitKey(ctx, sub.Key, req)
//	}
//	d, err := c.Wait(ctx, sub.Job.ID)
package client
