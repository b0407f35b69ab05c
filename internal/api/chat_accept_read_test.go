package api

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/inkwell/inkwell"
)

// TestReadAll_IsIoReadAll: readAll reads what io.ReadAll reads, whatever
// length the request declares (none, the true one, less, more, past
// maxBodyPresize), read at once or a byte at a time.
func TestReadAll_IsIoReadAll(t *testing.T) {
	for _, size := range []int{0, 1, 45, 2048, maxBodyPresize, maxBodyPresize + 3, 200 << 10} {
		body := bytes.Repeat([]byte("abcdefg"), size/7+1)[:size]
		for _, length := range []int64{-1, 0, int64(size), int64(size) / 2, int64(size) + 100} {
			for _, slow := range []bool{false, true} {
				var rd io.Reader = bytes.NewReader(body)
				if slow {
					rd = iotest.OneByteReader(rd)
				}
				got, err := readAll(rd, length)
				if err != nil || !bytes.Equal(got, body) {
					t.Fatalf("size %d, declared %d, one byte a read %v: read %d bytes (%v), want %d", size, length, slow, len(got), err, size)
				}
			}
		}
	}
	// An error is io.ReadAll's: what came before it, and the error.
	boom := errors.New("boom")
	got, err := readAll(io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(boom)), 10)
	if string(got) != "abc" || !errors.Is(err, boom) {
		t.Errorf("readAll of a failing reader = %q, %v; want abc, boom", got, err)
	}
}

// TestReadBody_LimitHoldsWhateverTheLengthSays: a body over MaxBodyBytes
// is 413 whether its Content-Length says so, says less, or is absent.
func TestReadBody_LimitHoldsWhateverTheLengthSays(t *testing.T) {
	big := strings.Repeat("x", 1<<20+1)
	for _, length := range []int64{int64(len(big)), 10, -1} {
		r := httptest.NewRequest(http.MethodPost, "/v1/jobs", strings.NewReader(big))
		r.ContentLength = length
		if _, err := readBody(httptest.NewRecorder(), r); statusOf[inkwell.ErrorCode(err)] != http.StatusRequestEntityTooLarge {
			t.Errorf("Content-Length %d: readBody = %v, want 413", length, err)
		}
	}
}
