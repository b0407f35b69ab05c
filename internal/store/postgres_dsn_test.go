package store_test

import (
	"strings"
	"testing"

	"github.com/inkwell/inkwell/internal/store"
)

func TestRedactDSN(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, want string }{
		{"SQLiteFile", "inkwell.db", "inkwell.db"},
		{"SQLitePath", "/var/lib/inkwell/inkwell.db", "/var/lib/inkwell/inkwell.db"},
		{"SQLiteURI", "file:inkwell.db?mode=rwc", "file:inkwell.db?mode=rwc"},
		{"NoPassword", "postgres://inkwell@db:5432/inkwell?sslmode=disable", "postgres://inkwell@db:5432/inkwell?sslmode=disable"},
		{"Plain", "postgres://inkwell:s3cret@db:5432/inkwell?sslmode=disable", "postgres://inkwell:xxxxx@db:5432/inkwell?sslmode=disable"},
		{"PercentEncoded", "postgres://nosuchuser:s3cr%40t@db/inkwell", "postgres://nosuchuser:xxxxx@db/inkwell"},
		{"EncodedColon", "postgresql://u:s3c%3Aret%2F@db/inkwell", "postgresql://u:xxxxx@db/inkwell"},
		{"QueryParameter", "postgresql://db/inkwell?password=s3cret&sslmode=require", "postgresql://db/inkwell?password=xxxxx&sslmode=require"},
		{"QueryParameterEncoded", "postgres://db/inkwell?sslmode=disable&password=s3c%26ret", "postgres://db/inkwell?sslmode=disable&password=xxxxx"},
		{"BothPlaces", "postgres://u:s3cret@db/inkwell?password=s3cret", "postgres://u:xxxxx@db/inkwell?password=xxxxx"},
		{"KeywordValue", "host=db user=u password=s3cret dbname=inkwell", "host=db user=u password=xxxxx dbname=inkwell"},
		{"KeywordValueQuoted", "host=db password='s3 cret' dbname=inkwell", "host=db password=xxxxx dbname=inkwell"},
		{"Unparsable", "postgres://u:s3cret@db:port/inkwell", "postgres://(unparsable URL, not shown)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := store.RedactDSN(tc.in)
			if got != tc.want {
				t.Errorf("RedactDSN(%q) = %q, want %q", tc.in, got, tc.want)
			}
			for _, secret := range []string{"s3cret", "s3cr%40t", "s3cr@t", "s3c%3Aret", "s3c%26ret", "s3 cret"} {
				if strings.Contains(got, secret) {
					t.Errorf("RedactDSN(%q) = %q leaks the password", tc.in, got)
				}
			}
		})
	}
}
