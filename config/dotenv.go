package config

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"
)

// parseDotenv reads a .env file's bytes the way Laravel's dotenv does for
// the cases that matter: KEY=VALUE lines, an optional "export ", comments,
// blank lines, and values in single quotes (taken literally) or double
// quotes (with \n, \" and \\ escapes).
func parseDotenv(b []byte, path string) (map[string]string, error) {
	out := map[string]string{}
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf")) // a byte-order mark, as some editors save
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, raw, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		key = strings.TrimSpace(key)
		if !ok || !validName(key) {
			return nil, fmt.Errorf("config: %s line %d: want KEY=VALUE", path, n)
		}
		val, err := dotenvValue(strings.TrimSpace(raw))
		if err != nil {
			return nil, fmt.Errorf("config: %s line %d (%s): %w", path, n, key, err)
		}
		out[key] = val
	}
	return out, sc.Err()
}

func dotenvValue(raw string) (string, error) {
	if raw == "" {
		return "", nil
	}
	switch q := raw[0]; q {
	case '\'', '"':
		end := closingQuote(raw, q)
		if end < 0 {
			return "", fmt.Errorf("unterminated %c quote", q)
		}
		if q == '\'' {
			return raw[1:end], nil
		}
		return strings.NewReplacer(`\n`, "\n", `\"`, `"`, `\\`, `\`).Replace(raw[1:end]), nil
	}
	if i := strings.Index(raw, " #"); i >= 0 { // an inline comment after an unquoted value
		raw = raw[:i]
	}
	return strings.TrimSpace(raw), nil
}

// closingQuote finds the quote that ends raw's value (skipping \" in double quotes).
func closingQuote(raw string, q byte) int {
	for i := 1; i < len(raw); i++ {
		if q == '"' && raw[i] == '\\' {
			i++
			continue
		}
		if raw[i] == q {
			return i
		}
	}
	return -1
}

// validName reports whether s is a variable name: a letter or underscore,
// then letters, digits and underscores.
func validName(s string) bool {
	for i, r := range s {
		letter := r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z'
		if !letter && (i == 0 || r < '0' || r > '9') {
			return false
		}
	}
	return s != ""
}

// WithDotenv returns getenv backed by the .env file in the working
// directory, as Read reads the server's configuration: a variable the
// environment lacks (or has empty) is taken from .env. The command-line
// client (`licensor licenses`) reads LICENSOR_URL and LICENSOR_TOKEN
// through it. A missing .env is no error; one that cannot be read or
// parsed is.
func WithDotenv(getenv func(string) string) (func(string) string, error) {
	dotenv := map[string]string{}
	b, err := os.ReadFile(".env")
	switch {
	case err == nil:
		if dotenv, err = parseDotenv(b, ".env"); err != nil {
			return nil, err
		}
	case !os.IsNotExist(err):
		return nil, fmt.Errorf("config: reading .env: %w", err)
	}
	return func(name string) string {
		if s := getenv(name); s != "" {
			return s
		}
		return dotenv[name]
	}, nil
}
