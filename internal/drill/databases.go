package drill

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/inkwell/inkwell/internal/store"
)

// databases hands out one fresh, empty database per scenario, so that no
// scenario reads another's rows.
type databases interface {
	// fresh returns the DSN of a new database named after name.
	fresh(ctx context.Context, name string) (string, error)
	// close drops what fresh created, unless the drill keeps its work.
	close(ctx context.Context) error
	// kind is "sqlite" or "postgres", for the report.
	kind() string
	// server says a database server runs the statements, where one sent
	// just before a kill may still run after the process is gone (settle).
	server() bool
}

// openDatabases reads --db: empty means SQLite files in the work dir, a
// directory means SQLite files there, and a postgres:// URL means one new
// database per scenario on that server.
func openDatabases(ctx context.Context, spec, workDir string, keep bool) (databases, error) {
	switch {
	case spec == "":
		return sqliteDir{dir: workDir}, nil
	case strings.HasPrefix(spec, "postgres://") || strings.HasPrefix(spec, "postgresql://"):
		return openPostgres(ctx, spec, keep)
	}
	if strings.Contains(spec, "://") {
		return nil, fmt.Errorf("--db %s: want a directory for SQLite files or a postgres:// URL", spec)
	}
	if err := os.MkdirAll(spec, 0o755); err != nil {
		return nil, fmt.Errorf("--db %s: %w", spec, err)
	}
	abs, err := filepath.Abs(spec)
	if err != nil {
		return nil, fmt.Errorf("--db %s: %w", spec, err)
	}
	return sqliteDir{dir: abs}, nil
}

// sqliteDir makes a new SQLite file per scenario. A file left by an
// earlier drill in the same directory is refused rather than reused.
type sqliteDir struct{ dir string }

func (d sqliteDir) fresh(_ context.Context, name string) (string, error) {
	path := filepath.Join(d.dir, name+".db")
	if _, err := os.Stat(path); err == nil {
		return "", fmt.Errorf("database %s already exists: give --db an empty directory", path)
	}
	return path, nil
}

func (sqliteDir) close(context.Context) error { return nil }
func (sqliteDir) kind() string                { return "sqlite" }
func (sqliteDir) server() bool                { return false }

// CreatePostgresDatabase creates an empty database called name on the
// server of adminURL and returns its URL. It is a variable so that the
// PostgreSQL backend can replace it (with a template database, say); the
// default goes through store.Open, so it works as soon as the store
// speaks PostgreSQL, and fails with the store's message until then.
var CreatePostgresDatabase = func(ctx context.Context, adminURL, name string) (string, error) {
	dsn, err := pgAdmin(ctx, adminURL, "CREATE DATABASE "+name, name)
	if err != nil {
		return "", err
	}
	// amcheck lets each snapshot verify the indexes (see postgresIntegrity).
	// Without it (no contrib, no privilege) the snapshots skip that check.
	_, _ = pgAdmin(ctx, dsn, "CREATE EXTENSION IF NOT EXISTS amcheck", name)
	return dsn, nil
}

// DropPostgresDatabase drops a database CreatePostgresDatabase made.
var DropPostgresDatabase = func(ctx context.Context, adminURL, name string) error {
	_, err := pgAdmin(ctx, adminURL, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)", name)
	return err
}

var pgName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

func pgAdmin(ctx context.Context, adminURL, stmt, name string) (string, error) {
	if !pgName.MatchString(name) {
		return "", fmt.Errorf("postgres database name %q: want lowercase letters, digits and _", name)
	}
	u, err := url.Parse(adminURL)
	if err != nil {
		return "", fmt.Errorf("--db: %w", err)
	}
	st, err := store.Open(ctx, adminURL, store.Options{NoMigrate: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return "", fmt.Errorf("postgres %s: %w", u.Redacted(), err)
	}
	defer st.Close()
	if _, err := st.DB().ExecContext(ctx, stmt); err != nil {
		return "", fmt.Errorf("postgres %s: %s: %w", u.Redacted(), stmt, err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

// postgresServer makes a new database per scenario on one server and
// drops them all at the end.
type postgresServer struct {
	admin   string
	prefix  string
	keep    bool
	created []string
}

func openPostgres(ctx context.Context, adminURL string, keep bool) (*postgresServer, error) {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	p := &postgresServer{admin: adminURL, prefix: "inkwell_drill_" + hex.EncodeToString(b) + "_", keep: keep}
	// Fail now, with the store's own words, rather than in every scenario.
	st, err := store.Open(ctx, adminURL, store.Options{NoMigrate: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, fmt.Errorf("--db postgres: %w (run the drill with --db DIR for SQLite)", err)
	}
	st.Close()
	return p, nil
}

func (p *postgresServer) fresh(ctx context.Context, name string) (string, error) {
	db := p.prefix + strings.NewReplacer("-", "_", ".", "_", ":", "_").Replace(strings.ToLower(name))
	if len(db) > 63 {
		db = db[:63]
	}
	dsn, err := CreatePostgresDatabase(ctx, p.admin, db)
	if err != nil {
		return "", err
	}
	p.created = append(p.created, db)
	return dsn, nil
}

func (p *postgresServer) close(ctx context.Context) error {
	if p.keep {
		return nil
	}
	// Each drop gets its own bound: DROP DATABASE checkpoints, which a
	// loaded server may take seconds to do, and one slow drop must not
	// leave the others' databases behind.
	var errs []error
	for _, db := range p.created {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dropTimeout)
		errs = append(errs, DropPostgresDatabase(dctx, p.admin, db))
		cancel()
	}
	return errors.Join(errs...)
}

func (p *postgresServer) kind() string { return "postgres" }
func (p *postgresServer) server() bool { return true }

// dropTimeout bounds the drop of one scenario's database.
const dropTimeout = 30 * time.Second
