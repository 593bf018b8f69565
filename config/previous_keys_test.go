package config

import (
	"bytes"
	"strings"
	"testing"
)

func TestPreviousKeys(t *testing.T) {
	t.Chdir(t.TempDir())
	a, b := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	c, err := Load(envOf(map[string]string{"APP_KEY": EncodeKey(NewKey()), "APP_PREVIOUS_KEYS": " " + EncodeKey(a) + ", ," + EncodeKey(b) + ","}))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.PreviousKeys) != 2 || !bytes.Equal(c.PreviousKeys[0], a) || !bytes.Equal(c.PreviousKeys[1], b) {
		t.Errorf("PreviousKeys = %x, want [a b] in order", c.PreviousKeys)
	}

	c, err = Load(envOf(map[string]string{"APP_KEY": EncodeKey(NewKey())}))
	if err != nil || len(c.PreviousKeys) != 0 {
		t.Errorf("unset APP_PREVIOUS_KEYS = %x, %v; want none", c.PreviousKeys, err)
	}
}

func TestBadPreviousKeyNamedNotShown(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, bad := range []string{"base64:c2hvcnQtc2VjcmV0", "hunter2-not-a-key"} {
		_, err := Load(envOf(map[string]string{"APP_KEY": EncodeKey(NewKey()), "APP_PREVIOUS_KEYS": EncodeKey(NewKey()) + "," + bad}))
		if err == nil {
			t.Fatalf("Load accepted APP_PREVIOUS_KEYS with %q", bad)
		}
		if !strings.Contains(err.Error(), "APP_PREVIOUS_KEYS") || !strings.Contains(err.Error(), "entry 2") {
			t.Errorf("error does not name the variable and entry: %v", err)
		}
		if strings.Contains(err.Error(), bad) || strings.Contains(err.Error(), "c2hvcnQ") {
			t.Errorf("error shows the value: %v", err)
		}
	}
}
