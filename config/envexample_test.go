package config

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// exampleLine is one assignment in .env.example.
type exampleLine struct {
	n       int    // its line number
	name    string // the variable
	value   string // as dotenv reads it
	comment string // the comment lines right above it, lowercased
}

// readExample reads .env.example: the assignments it shows (the defaults)
// and those it shows commented out ("# NAME=value").
func readExample(t *testing.T) (shown, commented []exampleLine) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", ".env.example"))
	if err != nil {
		t.Fatal(err)
	}
	var block []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		body, isComment := strings.CutPrefix(line, "#")
		name, raw, ok := strings.Cut(strings.TrimSpace(body), "=")
		if !ok || !validName(name) || strings.ToUpper(name) != name {
			if isComment {
				block = append(block, strings.ToLower(body))
			} else {
				block = nil
			}
			continue
		}
		value, err := dotenvValue(strings.TrimSpace(raw))
		if err != nil {
			t.Fatalf(".env.example line %d: %v", n, err)
		}
		l := exampleLine{n: n, name: name, value: value, comment: strings.Join(block, "\n")}
		if isComment {
			commented = append(commented, l)
		} else {
			shown = append(shown, l)
			block = nil
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return shown, commented
}

// .env.example says the values it shows are the defaults: each variable it
// shows, set alone to the value shown, loads the same configuration as
// nothing set. (A setting local work needs that is not the default is shown
// commented out, under a line saying it is local only.) Every variable
// Load reads is in the file, and every one the file shows is read.
//
// The checks that came before looked for two lines (VENDOR_ALLOW_FAKE=false,
// TOKEN_MAX_TTL=8760h), so WEBHOOK_ALLOW_PRIVATE=true, shown for local work
// after its default became false, went unnoticed.
func TestEnvExampleShowsTheDefaults(t *testing.T) {
	shown, commented := readExample(t)
	t.Chdir(t.TempDir()) // no .env read, the generated key made here
	read := map[string]bool{}
	def, err := Load(func(name string) string { read[name] = true; return "" })
	if err != nil {
		t.Fatalf("Load with nothing set: %v", err)
	}
	loads := func(name, value string) (Config, error) {
		return Load(envOf(map[string]string{name: value}))
	}
	listed := map[string]bool{}
	for _, l := range shown {
		listed[l.name] = true
		if !read[l.name] {
			t.Errorf(".env.example line %d shows %s, which Load never reads", l.n, l.name)
			continue
		}
		c, err := loads(l.name, l.value)
		if err != nil || !reflect.DeepEqual(c, def) {
			t.Errorf(".env.example line %d shows %s=%s, which is not the default (err %v)", l.n, l.name, l.value, err)
		}
	}
	for _, l := range commented {
		listed[l.name] = true
		if c, err := loads(l.name, l.value); (err != nil || !reflect.DeepEqual(c, def)) && !strings.Contains(l.comment, "local only") {
			t.Errorf(".env.example line %d: %s=%s (commented out) is not the default: the comment above it must say it is local only",
				l.n, l.name, l.value)
		}
	}
	for name := range read {
		if !listed[name] {
			t.Errorf("Load reads %s, which .env.example does not list", name)
		}
	}
}
