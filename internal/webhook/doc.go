// Package webhook owns the sending of webhook deliveries (docs/webhooks.md,
// docs/design.md §11): the sender loop serve runs, the Standard Webhooks
// payload and signature, time-outs, and back-off with jitter. The rows are
// the store's; it writes no SQL.
package webhook
