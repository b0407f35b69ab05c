package inkwell

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

// RequestHash is the fingerprint of a normalized request, stored in
// jobs.request_hash and compared when a key is re-sent.
func RequestHash(payload []byte) string {
	sum := sha256.Sum256(payload)
	return hex.EncodeToString(sum[:])
}

func hashShort(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
