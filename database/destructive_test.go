package database

import (
	"io/fs"
	"path"
	"strings"
	"testing"
)

// Every embedded migration whose rollback drops a table or a column is
// found destructive, whatever its layout (MySQL's 00009 drops a key and a
// column in one ALTER TABLE over three lines, which a line-by-line reading
// missed); one whose rollback drops nothing, or only an index, is not.
func TestDestructiveRollbacks(t *testing.T) {
	for _, dialect := range []string{"sqlite", "mysql"} {
		dir := "migrations/" + dialect
		entries, err := fs.ReadDir(migrations, dir)
		if err != nil || len(entries) == 0 {
			t.Fatalf("%s: %v (%d files)", dir, err, len(entries))
		}
		for _, e := range entries {
			b, err := fs.ReadFile(migrations, path.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			_, down, _ := strings.Cut(string(b), "-- +goose Down")
			code := strings.ToUpper(strings.Join(strings.Fields(stripSQLComments(down)), " "))
			want := strings.Contains(code, "DROP TABLE") || strings.Contains(code, "DROP COLUMN")
			if got := Destructive(down); (len(got) > 0) != want {
				t.Errorf("%s/%s: Destructive = %q, want destructive %v", dialect, e.Name(), got, want)
			}
		}
	}
	for down, want := range map[string]bool{
		"ALTER TABLE licenses\n    DROP KEY licenses_vendor_site_id_index,\n    DROP COLUMN vendor_event_at;": true,
		"ALTER TABLE t DROP old_column;":                    true,
		"drop table audit_events;":                          true,
		"ALTER TABLE t DROP INDEX i, DROP FOREIGN KEY fk;":  false,
		"DROP INDEX licenses_list_index;":                   false,
		"-- DROP TABLE licenses; only a comment\nSELECT 1;": false,
		"UPDATE license_events SET actor = request_id;":     false,
	} {
		if got := Destructive(down); (len(got) > 0) != want {
			t.Errorf("Destructive(%q) = %q, want destructive %v", down, got, want)
		}
	}
}
