// Package web holds the operator dashboard's HTML templates and static
// files (CSS, a little JavaScript), embedded so that the inkwell binary
// serves them with no front-end build step. internal/api renders them; this
// package imports nothing of Inkwell's.
package web

import "embed"

// FS holds templates/*.html and static/*.
//
//go:embed templates static
var FS embed.FS
