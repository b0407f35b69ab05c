package store_test

import (
	"testing"

	"github.com/inkwell/inkwell/internal/store/storetest"
)

// TestMain prints one line when PostgreSQL tests were skipped (no
// INKWELL_TEST_POSTGRES_URL), saying how to run them.
func TestMain(m *testing.M) { storetest.Main(m) }
