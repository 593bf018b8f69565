package database

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/pressly/goose/v3"
	"gorm.io/gorm"
)

//go:embed migrations
var migrations embed.FS

// ErrSchemaBehind means the database lacks migrations this binary has.
var ErrSchemaBehind = errors.New("the database schema is behind this binary: run `licensor migrate` first")

// Migrator applies the embedded migrations of one dialect.
type Migrator struct {
	provider *goose.Provider
	files    fs.FS    // the dialect's migration files
	db       *gorm.DB // on SQLite, for the migration lock; nil on MySQL
}

// MigrationStatus is one migration and whether it has been applied.
type MigrationStatus struct {
	Version int64
	Name    string
	Applied bool
}

// NewMigrator prepares the migrations for db's dialect.
func NewMigrator(db *gorm.DB) (*Migrator, error) {
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	dialect, dir := goose.DialectSQLite3, "migrations/sqlite"
	if db.Dialector.Name() == MySQL {
		dialect, dir = goose.DialectMySQL, "migrations/mysql"
	}
	sub, err := fs.Sub(migrations, dir)
	if err != nil {
		return nil, err
	}
	p, err := goose.NewProvider(dialect, sqlDB, sub)
	if err != nil {
		return nil, fmt.Errorf("load migrations: %w", err)
	}
	m := &Migrator{provider: p, files: sub}
	if dialect == goose.DialectSQLite3 {
		m.db = db
	}
	return m, nil
}

// Up applies every pending migration and returns how many it applied, also
// when one of them then failed. On SQLite it holds the migration lock
// meanwhile, so that two processes never both apply one migration.
func (m *Migrator) Up(ctx context.Context) (applied int, err error) {
	unlock, err := m.lock(ctx)
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, unlock()) }()
	res, err := m.provider.Up(ctx)
	if err != nil {
		var partial *goose.PartialError
		if errors.As(err, &partial) { // some were applied before one failed
			return len(partial.Applied), fmt.Errorf("migrate up: %w", err)
		}
		return len(res), fmt.Errorf("migrate up: %w", err)
	}
	return len(res), nil
}

// Down rolls back the newest applied migration. It returns the version
// rolled back, or 0 when nothing was applied. On SQLite it holds the
// migration lock meanwhile.
func (m *Migrator) Down(ctx context.Context) (version int64, err error) {
	unlock, err := m.lock(ctx)
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, unlock()) }()
	res, err := m.provider.Down(ctx)
	if errors.Is(err, goose.ErrNoNextVersion) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("migrate down: %w", err)
	}
	return res.Source.Version, nil
}

// lock takes the SQLite migration lock; MySQL needs none here, since only
// `licensor migrate` migrates it, run by hand.
func (m *Migrator) lock(ctx context.Context) (func() error, error) {
	if m.db == nil {
		return func() error { return nil }, nil
	}
	return lockSQLiteMigrations(ctx, m.db)
}

// Destructive are the statements of a migration's Down section that
// destroy data, whitespace collapsed: a table dropped, or a column (in an
// ALTER TABLE of any layout: "DROP COLUMN x", "DROP x", one clause of
// several). Dropping an index, a key or a constraint loses nothing.
func Destructive(down string) []string {
	var out []string
	for stmt := range strings.SplitSeq(stripSQLComments(down), ";") {
		stmt = strings.Join(strings.Fields(stmt), " ")
		switch {
		case dropTable.MatchString(stmt):
			out = append(out, stmt)
		case alterTable.MatchString(stmt):
			for clause := range strings.SplitSeq(alterTable.ReplaceAllString(stmt, ""), ",") {
				if m := dropClause.FindStringSubmatch(clause); m != nil && !keptByDrop[strings.ToUpper(m[1])] {
					out = append(out, stmt)
					break
				}
			}
		}
	}
	return out
}

var (
	dropTable  = regexp.MustCompile(`(?i)^DROP TABLE\b`)
	alterTable = regexp.MustCompile(`(?i)^ALTER TABLE \S+ `)
	dropClause = regexp.MustCompile(`(?i)^\s*DROP\s+(\S+)`)
	sqlComment = regexp.MustCompile(`--[^\n]*`)
	// keptByDrop are what DROP names in an ALTER TABLE without losing data.
	keptByDrop = map[string]bool{"INDEX": true, "KEY": true, "PRIMARY": true, "FOREIGN": true, "CONSTRAINT": true, "CHECK": true}
)

// stripSQLComments removes the -- comments of sql, each to the end of its
// line.
func stripSQLComments(sql string) string { return sqlComment.ReplaceAllString(sql, "") }

// Drops says what rolling back the newest applied migration (its version;
// 0 when none is applied) would destroy: the statements of its Down
// section that drop a table or a column, as written; none when its Down
// destroys nothing.
func (m *Migrator) Drops(ctx context.Context) (int64, []string, error) {
	v, err := m.provider.GetDBVersion(ctx)
	if err != nil {
		return 0, nil, fmt.Errorf("migration version: %w", err)
	}
	if v == 0 {
		return 0, nil, nil
	}
	for _, src := range m.provider.ListSources() {
		if src.Version != v {
			continue
		}
		b, err := fs.ReadFile(m.files, filepath.Base(src.Path))
		if err != nil {
			return v, nil, fmt.Errorf("read migration %d: %w", v, err)
		}
		_, down, _ := strings.Cut(string(b), "-- +goose Down")
		return v, Destructive(down), nil
	}
	return v, nil, fmt.Errorf("migration %d is applied but unknown to this binary", v)
}

// Status lists every migration this binary knows, oldest first.
func (m *Migrator) Status(ctx context.Context) ([]MigrationStatus, error) {
	st, err := m.provider.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("migration status: %w", err)
	}
	out := make([]MigrationStatus, 0, len(st))
	for _, s := range st {
		out = append(out, MigrationStatus{
			Version: s.Source.Version,
			Name:    s.Source.Path,
			Applied: s.State == goose.StateApplied,
		})
	}
	return out, nil
}

// CheckCurrent returns ErrSchemaBehind when a migration is pending.
func (m *Migrator) CheckCurrent(ctx context.Context) error {
	pending, err := m.provider.HasPending(ctx)
	if err != nil {
		return fmt.Errorf("check schema: %w", err)
	}
	if pending {
		return ErrSchemaBehind
	}
	return nil
}

// Migrations lists the migrations this binary has for a dialect, none of
// them applied: migrate status where there is no database yet.
func Migrations(dialect string) ([]MigrationStatus, error) {
	dir := "migrations/sqlite"
	if dialect == MySQL {
		dir = "migrations/mysql"
	}
	entries, err := fs.ReadDir(migrations, dir)
	if err != nil {
		return nil, err
	}
	var out []MigrationStatus
	for _, e := range entries {
		version, err := goose.NumericComponent(e.Name())
		if err != nil {
			continue
		}
		out = append(out, MigrationStatus{Version: version, Name: e.Name()})
	}
	return out, nil
}
