package storetest

import "testing"

// freshPostgres is filled in with the PostgreSQL backend: it will create a
// database from a migrated template and drop it at cleanup. Until then a
// set INKWELL_TEST_POSTGRES_URL fails loudly rather than skipping.
func freshPostgres(t *testing.T, url string) string {
	t.Helper()
	t.Fatalf("%s is set but the PostgreSQL backend is not built yet", PostgresEnv)
	return ""
}
