package tests

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/tests/testdb"
)

// mountTmpfs mounts a tmpfs of size bytes on a new directory, unmounted
// when the test ends. It skips the test where it may not mount (not root,
// or no CAP_SYS_ADMIN in the container).
func mountTmpfs(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		t.Skipf("cannot mount a tmpfs to fill here (%v): this test needs root with CAP_SYS_ADMIN", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fillDisk writes a file in dir until its file system refuses (ENOSPC),
// and returns the function that removes it again.
func fillDisk(t *testing.T, dir string) (free func()) {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for {
		if _, err = f.Write(chunk); err != nil {
			break
		}
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("filling %s: %v, want ENOSPC", dir, err)
	}
	// The last pages, to the last byte the file system gives.
	for _, err = f.Write(chunk[:1]); err == nil; _, err = f.Write(chunk[:1]) {
	}
	f.Close()
	return func() {
		if err := os.Remove(path); err != nil {
			t.Errorf("free the disk: %v", err)
		}
	}
}

// /readyz on SQLite answers 503 naming the "disk" check when the file
// system that holds the database is full, a real one (a tmpfs filled to
// its last byte): also while SQLite itself still writes in place within
// its write-ahead log, which a checkpoint has left for reuse, so that the
// probe row alone still succeeds (it did: /readyz answered 200 on a full
// disk). Freed, the disk makes it 200 again.
func TestReadyzAnswers503WhenTheDiskIsFull(t *testing.T) {
	dir := mountTmpfs(t, 8<<20)
	cfg := config.DB{Connection: database.SQLite, Database: filepath.Join(dir, "database.sqlite"),
		MaxOpenConns: 1, MaxIdleConns: 1, QueryTimeout: 5 * time.Second}
	ctx := context.Background()
	writer, err := database.OpenMigrated(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { database.Close(writer) })
	reader, err := database.OpenReader(ctx, cfg, writer)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { database.Close(reader) })
	a := newApp(t, &testdb.DB{Dialect: database.SQLite, Config: cfg, Gorm: writer, Read: reader})
	a.do(http.MethodGet, "/readyz", "").wantStatus(http.StatusOK)

	// Every frame of the log copied into the database: the next write
	// starts the log over, in the space its file already has.
	if err := writer.Exec("PRAGMA wal_checkpoint(RESTART)").Error; err != nil {
		t.Fatal(err)
	}
	free := fillDisk(t, dir)
	r := a.do(http.MethodGet, "/readyz", "")
	m := r.wantError(http.StatusServiceUnavailable, "database_unavailable")
	if m["check"] != "disk" {
		t.Errorf("/readyz on a full disk = %s, want the failing check named: \"check\":\"disk\"", r.Body.String())
	}
	if r.Header().Get("Retry-After") == "" {
		t.Error("/readyz's 503 without Retry-After")
	}

	free()
	a.do(http.MethodGet, "/readyz", "").wantStatus(http.StatusOK)
}
