package store

import (
	"strings"
	"testing"
	"time"
)

func TestNullTime_Scan(t *testing.T) {
	t.Parallel()
	utc := func(y int, mo time.Month, d, h, mi, s, ns int) time.Time {
		return time.Date(y, mo, d, h, mi, s, ns, time.UTC)
	}
	paris := time.FixedZone("CET", 3600)
	tests := []struct {
		name    string
		in      any
		want    time.Time
		valid   bool
		wantErr string // substring; "" means no error
	}{
		{"InkwellLayout", "2026-03-01T12:00:00.123456Z", utc(2026, 3, 1, 12, 0, 0, 123456000), true, ""},
		{"InkwellLayoutBytes", []byte("2026-03-01T12:00:00.000001Z"), utc(2026, 3, 1, 12, 0, 0, 1000), true, ""},
		{"RFC3339", "2026-03-01T12:00:00Z", utc(2026, 3, 1, 12, 0, 0, 0), true, ""},
		{"RFC3339NanoOffsetBecomesUTC", "2026-03-01T13:00:00.5+01:00", utc(2026, 3, 1, 12, 0, 0, 500000000), true, ""},
		{"LegacySpace", "2024-03-01 10:02:03", utc(2024, 3, 1, 10, 2, 3, 0), true, ""},
		{"LegacySpaceFraction", "2024-03-01 10:02:03.250", utc(2024, 3, 1, 10, 2, 3, 250000000), true, ""},
		{"NoZoneT", "2024-03-01T10:02:03", utc(2024, 3, 1, 10, 2, 3, 0), true, ""},
		{"DateOnly", "2024-03-01", utc(2024, 3, 1, 0, 0, 0, 0), true, ""},
		{"DriverTimeBecomesUTC", time.Date(2026, 3, 1, 13, 0, 0, 7, paris), utc(2026, 3, 1, 12, 0, 0, 7), true, ""},
		{"NULL", nil, time.Time{}, false, ""},
		{"BadText", "yesterday", time.Time{}, false, `cannot read "yesterday"`},
		{"Empty", "", time.Time{}, false, `cannot read ""`},
		{"BadMonth", "2024-13-01 00:00:00", time.Time{}, false, "cannot read"},
		{"TrailingGarbage", "2024-03-01 10:02:03 junk", time.Time{}, false, "cannot read"},
		{"Integer", int64(1700000000), time.Time{}, false, "unsupported type int64"},
		{"Float", 1.5, time.Time{}, false, "unsupported type float64"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var n nullTime
			err := n.Scan(tc.in)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Scan(%#v) = %v, want no error", tc.in, err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Scan(%#v) = %v, want an error containing %q", tc.in, err, tc.wantErr)
			}
			if n.Valid != tc.valid {
				t.Errorf("Scan(%#v): Valid = %v, want %v", tc.in, n.Valid, tc.valid)
			}
			if !n.Time.Equal(tc.want) || (tc.valid && n.Time.Location() != time.UTC) {
				t.Errorf("Scan(%#v) = %v, want %v in UTC", tc.in, n.Time, tc.want)
			}
			p := n.Ptr()
			if (p != nil) != tc.valid || (p != nil && !p.Equal(tc.want)) {
				t.Errorf("Ptr() = %v, want %v (valid %v)", p, tc.want, tc.valid)
			}
		})
	}
}

// TestTimeLayout_SortsAsText: the stored form sorts as text in time order,
// which SQLite's indexes and ORDER BY rely on.
func TestTimeLayout_SortsAsText(t *testing.T) {
	t.Parallel()
	times := []time.Time{
		time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 1000, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 999999000, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 6, 0, time.FixedZone("ahead", 3600)), // earlier instant in UTC
	}
	for i := range times {
		for j := range times {
			a, b := sqliteDialect.ts(times[i]).(string), sqliteDialect.ts(times[j]).(string)
			if (a < b) != times[i].Before(times[j]) {
				t.Errorf("%v vs %v: text %q < %q is %v, time order says %v", times[i], times[j], a, b, a < b, times[i].Before(times[j]))
			}
			var n nullTime
			if err := n.Scan(a); err != nil || !n.Time.Equal(times[i]) {
				t.Errorf("round trip of %v through %q = %v (%v)", times[i], a, n.Time, err)
			}
		}
	}
}
