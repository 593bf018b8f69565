package config

import (
	"os"
	"strings"
	"testing"
)

// DB_URL implies its connection: a MySQL DSN or a mysql:// URL serves
// MySQL without DB_CONNECTION; anything else, and DB_URL beside an explicit
// DB_CONNECTION=sqlite, stops start-up naming DB_URL, never quoting it (it
// may hold a password).
func TestDBURLImpliesItsConnection(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, tc := range []struct {
		name, conn, url string
		wantErr         []string // empty: MySQL
	}{
		{"a DSN", "", "app:s3cret@tcp(db.internal:3306)/licensor", nil},
		{"a DSN with params", "", "app:s3cret@tcp(db:3306)/licensor?tls=true&loc=Europe/Paris", nil},
		{"a unix socket", "", "app@unix(/run/mysqld/mysqld.sock)/licensor", nil},
		{"a mysql:// URL", "", "mysql://app:s3cret@db.internal:3306/licensor", nil},
		{"a DSN, DB_CONNECTION=mysql", "mysql", "app:s3cret@tcp(db:3306)/licensor", nil},
		{"a postgres URL", "", "postgres://app:s3cret@db/licensor", []string{"DB_URL", "MySQL DSN"}},
		{"a file", "", "storage/other.sqlite", []string{"DB_URL", "DB_DATABASE"}},
		{"DB_CONNECTION=sqlite", "sqlite", "app:s3cret@tcp(db:3306)/licensor", []string{"DB_URL", "DB_CONNECTION=sqlite"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Read(envOf(map[string]string{"DB_CONNECTION": tc.conn, "DB_URL": tc.url}))
			if len(tc.wantErr) == 0 {
				if err != nil || c.DB.Connection != "mysql" || c.DB.URL != tc.url {
					t.Fatalf("DB_URL %s: connection %q, err %v; want mysql", tc.url, c.DB.Connection, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("DB_URL %s with DB_CONNECTION=%q: no error, connection %q", tc.url, tc.conn, c.DB.Connection)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("err = %v, want it to name %q", err, want)
				}
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("err = %v repeats the password", err)
			}
		})
	}
}

// Read creates nothing: in local without APP_KEY and without a key file it
// leaves Key nil and no storage/ behind; CreateKey then makes the file, and
// a second Read reads it.
func TestReadCreatesNothing(t *testing.T) {
	t.Chdir(t.TempDir())
	c, err := Read(envOf(nil))
	if err != nil || c.Key != nil {
		t.Fatalf("Read = key %v, err %v; want no key, no error", c.Key, err)
	}
	if _, err := os.Stat("storage"); !os.IsNotExist(err) {
		t.Fatalf("Read left storage/ behind: %v", err)
	}
	if err := c.CreateKey(); err != nil || len(c.Key) != 32 || c.KeySource != "file" {
		t.Fatalf("CreateKey: key %d bytes from %q, err %v", len(c.Key), c.KeySource, err)
	}
	again, err := Read(envOf(nil))
	if err != nil || string(again.Key) != string(c.Key) {
		t.Fatalf("Read after CreateKey: err %v, same key %v", err, string(again.Key) == string(c.Key))
	}
}
