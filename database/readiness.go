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

// TableName is the table the probes are written to.
func (readinessProbe) TableName() string { return "readiness_probes" }

// ProbeWrite reports whether the database takes a write: it writes a probe
// row, checked at now, to the readiness_probes table and deletes it again,
// leaving nothing behind. A ping alone would pass on a database that
// refuses writes.
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

// diskProbeSize is how much the disk check writes: one SQLite page, the
// least a write that grows the database or its log needs.
const diskProbeSize = 4096

// Readiness is /readyz's question: does the database take a write now? On
// SQLite it first writes diskProbeSize bytes to a new file beside the
// database file and removes it (CheckDisk), then writes and deletes the
// probe row (CheckDatabase). The file is needed because the row is not
// enough on a full disk: once a checkpoint has copied the write-ahead log
// into the database, SQLite writes the next commits over the log's old
// frames, in space the file already has, so the probe row succeeds on a
// disk that has no byte left, until the log must grow or the database
// must, and every write then fails with SQLITE_FULL. On MySQL only the
// row is written: licensor writes nothing to a disk of its own there, and
// the server's disk is the server's to watch (once full, the row's INSERT
// fails, or waits for space past the two seconds /readyz gives it).
//
// Nothing is cached: the file costs less than the row (a create, a 4 KiB
// write left to the page cache, no sync, a remove), and a failure shows on
// the very next /readyz.
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

// sqliteDir is the directory of the SQLite file, as the database itself
// names it (PRAGMA database_list), looked up once: "" for an in-memory
// database.
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

// probeDisk writes diskProbeSize bytes to a new file in dir, then removes
// it. A full file system refuses the write itself (ENOSPC: tmpfs, and ext4
// and XFS, which reserve the space when written to), a read-only one the
// create (EROFS), so nothing is synced. The file is 0600 and named
// .readyz-*; one left by a process killed between the two steps is 4 KiB
// that may be deleted.
func probeDisk(dir string) error {
	f, err := os.CreateTemp(dir, ".readyz-*")
	if err != nil {
		return err
	}
	_, werr := f.Write(make([]byte, diskProbeSize))
	return errors.Join(werr, f.Close(), os.Remove(f.Name()))
}
