package database

import (
	"encoding/hex"
	"testing"
	"time"
)

// SQLite stores times as the text every row has held since the first
// release ("2006-01-02 15:04:05.999999999-07:00", UTC), so that rows written
// before the driver changed and rows written after it compare as times in
// SQL (expires_at < ?, the cursor's keyset), and read back as UTC.
func TestSQLiteTimesKeepTheirTextForm(t *testing.T) {
	db := openSQLite(t)
	at := time.Date(2026, 11, 30, 10, 0, 0, 123456000, time.UTC)
	if err := db.Exec("INSERT INTO consumers (id, name, created_at, updated_at) VALUES ('new', 'new', ?, ?)", at, at).Error; err != nil {
		t.Fatal(err)
	}
	// A row as the earlier driver wrote it, a second later, with a whole second.
	if err := db.Exec("INSERT INTO consumers (id, name, created_at, updated_at) VALUES ('old', 'old', '2026-11-30 10:00:01+00:00', '2026-11-30 10:00:01+00:00')").Error; err != nil {
		t.Fatal(err)
	}
	// hex(): the stored bytes, which no driver converts on the way out.
	var stored string
	if err := db.Raw("SELECT hex(created_at) FROM consumers WHERE id = 'new'").Scan(&stored).Error; err != nil {
		t.Fatal(err)
	}
	rawBytes, err := hex.DecodeString(stored)
	if err != nil {
		t.Fatal(err)
	}
	raw := string(rawBytes)
	if want := "2026-11-30 10:00:00.123456+00:00"; raw != want {
		t.Errorf("stored %q, want %q", raw, want)
	}
	var before []string
	if err := db.Raw("SELECT id FROM consumers WHERE created_at < ? ORDER BY created_at", at.Add(500*time.Millisecond)).Scan(&before).Error; err != nil {
		t.Fatal(err)
	}
	if len(before) != 1 || before[0] != "new" {
		t.Errorf("created_at < 10:00:00.623: %v, want [new]", before)
	}
	var got struct{ CreatedAt time.Time }
	if err := db.Raw("SELECT created_at FROM consumers WHERE id = 'old'").Scan(&got).Error; err != nil {
		t.Fatal(err)
	}
	if !got.CreatedAt.Equal(at.Truncate(time.Second).Add(time.Second)) || got.CreatedAt.Location() != time.UTC {
		t.Errorf("the old row reads back as %v, want 2026-11-30 10:00:01 UTC", got.CreatedAt)
	}
	// An expression's text stays text, whatever it looks like.
	if err := db.Exec("UPDATE consumers SET name = '2026-11-30 10:00:01+00:00' WHERE id = 'old'").Error; err != nil {
		t.Fatal(err)
	}
	var text string
	if err := db.Raw("SELECT name || '' FROM consumers WHERE id = 'old'").Scan(&text).Error; err != nil {
		t.Fatal(err)
	}
	if text != "2026-11-30 10:00:01+00:00" {
		t.Errorf("a text expression read back as %q", text)
	}
}
