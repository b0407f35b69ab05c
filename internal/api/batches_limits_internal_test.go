package api

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/inkwell/inkwell"
)

// countingReader serves lines line-1… lazily and counts what was read.
type countingReader struct {
	next, total int
	pending     []byte
	read        int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	for len(c.pending) < len(p) && c.next < c.total {
		c.next++
		c.pending = fmt.Appendf(c.pending, `{"custom_id":"line-%d","method":"POST","url":"/v1/jobs","body":{"prompt":"p"}}`+"\n", c.next)
	}
	if len(c.pending) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	c.read += int64(n)
	return n, nil
}

func batchRequest(body io.Reader, length int64) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/v1/batches", body)
	r.ContentLength = length
	r.Header.Set("Idempotency-Key", "k")
	r.Header.Set("Content-Type", "application/jsonl")
	return r
}

// TestParseBatch_RefusedBeforeReadingItAll: a Content-Length over the limit
// is refused before one byte is read; line 50,001 is refused as soon as it
// is read, with the rest of the body never read.
func TestParseBatch_RefusedBeforeReadingItAll(t *testing.T) {
	t.Parallel()
	big := &countingReader{total: 10}
	_, _, err := parseBatch(httptest.NewRecorder(), batchRequest(big, MaxBatchBytes+1))
	if inkwell.ErrorCode(err) != inkwell.ETOOLARGE || big.read != 0 {
		t.Errorf("Content-Length %d: %v after reading %d bytes; want too_large before reading any", int64(MaxBatchBytes+1), err, big.read)
	}

	many := &countingReader{total: MaxBatchLines + 10_000}
	_, _, err = parseBatch(httptest.NewRecorder(), batchRequest(many, -1))
	if inkwell.ErrorCode(err) != inkwell.ETOOLARGE || !strings.Contains(err.Error(), fmt.Sprintf("line %d:", MaxBatchLines+1)) {
		t.Errorf("%d lines: %v, want too_large naming line %d", many.total, err, MaxBatchLines+1)
	}
	if many.next >= many.total {
		t.Errorf("read all %d lines before refusing; want to stop soon after line %d", many.total, MaxBatchLines+1)
	}

	exact := &countingReader{total: MaxBatchLines}
	p, _, err := parseBatch(httptest.NewRecorder(), batchRequest(exact, -1))
	if err != nil || len(p.Lines) != MaxBatchLines {
		t.Errorf("%d lines: %d lines, %v; want all accepted", MaxBatchLines, len(p.Lines), err)
	}
}

// TestParseBatch_BodyOverTheLimitWithoutLength: a chunked body (no
// Content-Length) is cut at MaxBatchBytes.
func TestParseBatch_BodyOverTheLimitWithoutLength(t *testing.T) {
	t.Parallel()
	line := `{"custom_id":"x","method":"POST","url":"/v1/jobs","body":{"prompt":"` + strings.Repeat("p", 8000) + `"}}` + "\n"
	body := io.MultiReader(strings.NewReader(line), strings.NewReader(strings.Repeat(strings.Repeat(" ", 50_000)+"\n", MaxBatchBytes/50_001+1)))
	_, _, err := parseBatch(httptest.NewRecorder(), batchRequest(body, -1))
	if inkwell.ErrorCode(err) != inkwell.ETOOLARGE || !strings.Contains(err.Error(), "bytes") {
		t.Errorf("a %d-byte chunked body: %v, want too_large", MaxBatchBytes+len(line), err)
	}
}
