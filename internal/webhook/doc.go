// Package webhook owns the sending of webhook deliveries (docs/design.md §11):
// the sender loop that serve runs, the Standard Webhooks payload and its
// signature (webhook-id, webhook-timestamp, webhook-signature: v1 and the
// base64 HMAC-SHA256 of "id.timestamp.body" under the account's whsec_
// secret), time-outs, and back-off with jitter and a cap.
//
// It writes no SQL: the delivery rows are written by the store (the row for
// an ending job by a trigger in the transaction that ends it; see
// internal/store/webhooks.go) and claimed and marked through store
// methods. It imports inkwell, store and crashpoint; never api or worker.
//
// Delivery is at least once: a crash between the receiver's 2xx and the
// commit that marks the row delivered (crash point webhook.after-send)
// sends it again, with the same webhook-id, so receivers dedupe on it.
package webhook
