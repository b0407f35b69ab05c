package store

import "github.com/inkwell/inkwell/internal/crashpoint"

// hit fires a named crash point; an empty name is no point at all.
func hit(name string) {
	if name != "" {
		crashpoint.Hit(name)
	}
}
