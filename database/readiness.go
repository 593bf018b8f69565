package database

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
	"gorm.io/gorm"
	"gorm.io/gorm/schema"

	"github.com/licensor-api/licensor/internal/fault"
)

// readinessProbe is the row ProbeWrite writes and deletes again.
type readinessProbe struct {
	ID        string `gorm:"primaryKey"`
	CheckedAt time.Time
}

var _ schema.Tabler = readinessProbe{}

// TableName implements schema.Tabler.
func (readinessProbe) TableName() string { return "readiness_probes" }

// ProbeWrite writes a row to readiness_probes and deletes it again: a ping
// alone would pass on a database that refuses writes.
func ProbeWrite(ctx context.Context, db *gorm.DB, now time.Time) error {
	probe := readinessProbe{ID: ulid.Make().String(), CheckedAt: now.UTC()}
	db = db.WithContext(ctx)
	if err := db.Create(&probe).Error; err != nil {
		return err
	}
	return db.Delete(&readinessProbe{}, "id = ?", probe.ID).Error
}

// The readiness checks, as a failing /readyz names them.
const (
	// CheckDisk: the directory of the SQLite file takes no write (a full
	// or read-only file system). SQLite only.
	CheckDisk = "disk"
	// CheckDatabase: the probe row could not be written (see ProbeWrite).
	CheckDatabase = "database"
)

// The failures of the readiness checks: each one's code is its check's
// name, which app/http, knowing no database package, tells by fault.Code.
var (
	ErrDiskNotReady     error = fault.New(CheckDisk, "disk not ready")
	ErrDatabaseNotReady error = fault.New(CheckDatabase, "database not ready")
)

// diskProbeSize is one SQLite page, the least a growing write needs.
const diskProbeSize = 4096

// Readiness is /readyz's question: does the database take a write now? On
// SQLite it first writes a file beside the database (CheckDisk), then the
// probe row (CheckDatabase). The row alone passes on a full disk: after a
// checkpoint SQLite writes commits over the log's old frames, in space it
// already has, until the log or database must grow and every write fails
// with SQLITE_FULL. On MySQL the server's disk is the server's to watch.
// Nothing is cached: the file costs less than the row.
type Readiness struct {
	db  *gorm.DB
	now func() time.Time

	mu     sync.Mutex
	dir    string // the SQLite file's directory, once known
	probed bool   // dir was looked up (it stays "" for an in-memory database)
}

// NewReadiness checks db's readiness, the probe row checked at now().
func NewReadiness(db *gorm.DB, now func() time.Time) *Readiness {
	if now == nil {
		now = time.Now
	}
	return &Readiness{db: db, now: now}
}

// Check runs the checks in order and returns the first failure, wrapping
// its check's error (ErrDiskNotReady, ErrDatabaseNotReady).
func (r *Readiness) Check(ctx context.Context) error {
	if r.db.Dialector.Name() == SQLite {
		// A directory not known yet (the database does not even answer
		// PRAGMA database_list) is left to the row, which fails too.
		if dir, err := r.sqliteDir(ctx); err == nil && dir != "" {
			if err := probeDisk(dir); err != nil {
				return fmt.Errorf("%w: %w", ErrDiskNotReady, err)
			}
		}
	}
	if err := ProbeWrite(ctx, r.db, r.now()); err != nil {
		return fmt.Errorf("%w: %w", ErrDatabaseNotReady, err)
	}
	return nil
}

// sqliteDir is looked up once; "" for an in-memory database.
func (r *Readiness) sqliteDir(ctx context.Context) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.probed {
		return r.dir, nil
	}
	var files []struct {
		Seq  int
		Name string
		File string
	}
	if err := r.db.WithContext(ctx).Raw("PRAGMA database_list").Scan(&files).Error; err != nil {
		return "", err
	}
	for _, f := range files {
		if f.Name == "main" && f.File != "" {
			r.dir = filepath.Dir(f.File)
		}
	}
	r.probed = true
	return r.dir, nil
}

// probeDisk needs no sync: a full file system refuses the write itself
// (ENOSPC on tmpfs, ext4, XFS), a read-only one the create. A .readyz-* file
// left by a killed process may be deleted.
func probeDisk(dir string) error {
	f, err := os.CreateTemp(dir, ".readyz-*")
	if err != nil {
		return err
	}
	_, werr := f.Write(make([]byte, diskProbeSize))
	return errors.Join(werr, f.Close(), os.Remove(f.Name()))
}
