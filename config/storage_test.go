package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A bad APP_STORAGE is reported as APP_STORAGE, never as APP_KEY (whose
// generated file lives there), with or without an APP_KEY set.
func TestBadStorageNamesAppStorage(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := os.WriteFile("afile", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
	}{
		{"a file", map[string]string{"APP_STORAGE": "afile"}},
		{"a file, APP_KEY set", map[string]string{"APP_STORAGE": "afile", "APP_KEY": testKey}},
		{"under a file", map[string]string{"APP_STORAGE": filepath.Join("afile", "storage")}},
	} {
		_, err := Load(envOf(tc.env))
		if err == nil || !strings.Contains(err.Error(), "APP_STORAGE") || strings.Contains(err.Error(), "APP_KEY:") {
			t.Errorf("%s: err = %v, want APP_STORAGE named, not APP_KEY", tc.name, err)
		}
	}
	// A key file that is wrong is still APP_KEY's: the key is at fault.
	if err := os.MkdirAll("storage", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("storage", keyFile), []byte("nonsense\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(envOf(nil)); err == nil || !strings.Contains(err.Error(), "config: APP_KEY:") {
		t.Errorf("a bad storage/app.key: err = %v, want APP_KEY named", err)
	}
}
