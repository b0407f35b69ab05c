package store

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestUnavailableReason: each way PostgreSQL fails to take a write is
// named for what it is; a deadline that ran out (a lock held by another
// session) is not called a lost connection.
func TestUnavailableReason(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("accept: %w", context.DeadlineExceeded), "did not answer in time"},
		{fmt.Errorf("commit: %w", io.ErrUnexpectedEOF), "connection lost"},
		{&pgconn.PgError{Code: "55P03"}, "lock wait"},
		{&pgconn.PgError{Code: "53100"}, "disk is full"},
		{&pgconn.PgError{Code: "57P01"}, "server restarting"},
		{&pgconn.PgError{Code: "23505"}, ""},
	} {
		got := unavailableReason(tc.err)
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("unavailableReason(%v) = %q, want it to say %q", tc.err, got, tc.want)
		}
	}
}
