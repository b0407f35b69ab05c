package store

import (
	"fmt"
	"time"
)

// timeLayouts are the text forms a SQLite time column may hold: Inkwell's
// own, RFC 3339 in general, and the legacy "YYYY-MM-DD HH:MM:SS" (UTC) that
// the old single-table Inkwell and CURRENT_TIMESTAMP write.
var timeLayouts = []string{
	TimeLayout,
	time.RFC3339Nano,
	"2006-01-02 15:04:05.999999999",
	"2006-01-02 15:04:05",
	"2006-01-02T15:04:05",
	"2006-01-02",
}

// nullTime scans a time column of either dialect: TEXT in any of
// timeLayouts, a driver time.Time, or NULL.
type nullTime struct {
	Time  time.Time
	Valid bool
}

func (n *nullTime) Scan(v any) error {
	switch v := v.(type) {
	case nil:
		n.Valid = false
		return nil
	case time.Time:
		n.Time, n.Valid = v.UTC(), true
		return nil
	case string:
		return n.parse(v)
	case []byte:
		return n.parse(string(v))
	}
	return fmt.Errorf("time column: unsupported type %T", v)
}

func (n *nullTime) parse(s string) error {
	for _, layout := range timeLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			n.Time, n.Valid = t.UTC(), true
			return nil
		}
	}
	return fmt.Errorf("time column: cannot read %q", s)
}

// Ptr returns the time or nil when NULL.
func (n nullTime) Ptr() *time.Time {
	if !n.Valid {
		return nil
	}
	t := n.Time
	return &t
}
