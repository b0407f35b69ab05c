package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/inkwell/inkwell/internal/store"
)

// The Standard Webhooks headers.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// Payload is the body of every delivery, in the structure Standard
// Webhooks recommends: the event's type, when it happened, and its data.
type Payload struct {
	Type      string    `json:"type"`      // job.done or job.failed
	Timestamp time.Time `json:"timestamp"` // when the job ended (not when this was sent)
	Data      JobEvent  `json:"data"`
}

// JobEvent is what a job's end says: enough to act on, and the job's path
// for the rest (GET it for the result text and the charge).
type JobEvent struct {
	JobID          int64     `json:"job_id"`
	IdempotencyKey string    `json:"idempotency_key"`
	Account        string    `json:"account"`
	Status         string    `json:"status"` // done or failed
	Error          string    `json:"error,omitempty"`
	ErrorClass     string    `json:"error_class,omitempty"`
	FinishedAt     time.Time `json:"finished_at"`
	Path           string    `json:"path"` // /v1/jobs/{id}
}

// Body is the delivery's body: the same bytes on every attempt and every
// replay, since it is built only from the row's snapshot of the job's end.
func Body(d store.WebhookDelivery) ([]byte, error) {
	occurred := d.OccurredAt.UTC().Truncate(time.Microsecond)
	p := Payload{
		Type:      d.Event,
		Timestamp: occurred,
		Data: JobEvent{
			JobID: d.JobID, IdempotencyKey: d.IdempotencyKey, Account: d.Account,
			Status: strings.TrimPrefix(d.Event, "job."), Error: d.JobError, ErrorClass: d.JobErrorClass,
			FinishedAt: occurred, Path: "/v1/jobs/" + strconv.FormatInt(d.JobID, 10),
		},
	}
	return json.Marshal(p)
}

// Sign returns the webhook-signature header value for one attempt:
// "v1," and the base64 of HMAC-SHA256 over "id.timestamp.body", keyed with
// the base64-decoded part of the whsec_ secret.
func Sign(secret, msgID string, timestamp int64, body []byte) (string, error) {
	key, err := secretKey(secret)
	if err != nil {
		return "", err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(msgID))
	mac.Write([]byte{'.'})
	mac.Write([]byte(strconv.FormatInt(timestamp, 10)))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)), nil
}

func secretKey(secret string) ([]byte, error) {
	raw, ok := strings.CutPrefix(secret, store.WebhookSecretPrefix)
	if !ok {
		return nil, fmt.Errorf("webhook secret does not start with %s", store.WebhookSecretPrefix)
	}
	key, err := base64.StdEncoding.DecodeString(raw)
	if err != nil || len(key) < 24 {
		return nil, fmt.Errorf("webhook secret: want the base64 of 24 to 64 bytes after %s", store.WebhookSecretPrefix)
	}
	return key, nil
}
