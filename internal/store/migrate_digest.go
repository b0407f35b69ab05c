package store

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// MigrationsDigest is a short hash of a dialect's embedded migrations, in
// order. Tests name their migrated template database by it, so a template
// is rebuilt whenever a migration is added or edited.
func MigrationsDigest(dialect string) (string, error) {
	migs, err := loadMigrations(dialect)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, m := range migs {
		fmt.Fprintf(h, "%d\x00%s\x00%d\x00%s\x00", m.version, m.name, len(m.sql), m.sql)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}
