package inkwell

import "time"

// FormatTime is how every screen shows a time: the CLI, the dashboard,
// the logs' words and the operator views' next actions all print RFC 3339
// in UTC to the second, 2026-12-01T08:42:49Z. JSON answers carry the same
// form with the fraction of a second (time.Time's own JSON, in UTC).
func FormatTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }
