package console

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

// issueCLI runs `licensor token issue` with args in the working directory's
// SQLite database; it returns the token printed and the error.
func issueCLI(t *testing.T, vars map[string]string, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := Run(context.Background(), append([]string{"token", "issue"}, args...), getenvOf(vars), &stdout, &stderr)
	return strings.TrimSpace(stdout.String()), err
}

func wantUsage(t *testing.T, err error, mention string) {
	t.Helper()
	var u usageError
	if !errors.As(err, &u) || ExitCode(err) != 2 {
		t.Fatalf("err = %v, want a usage error (exit 2)", err)
	}
	if !strings.Contains(err.Error(), mention) {
		t.Errorf("err = %q, want it to mention %q", err, mention)
	}
}

// The operator at the command line holds no token and may grant any known
// ability, admin abilities included.
func TestTokenIssueGrantsAnyAbility(t *testing.T) {
	t.Chdir(t.TempDir())
	migrateHere(t, getenvOf(nil))
	for _, abilities := range []string{"*", "tokens:manage", "intents:manage", "licenses:read,licenses:write,tokens:manage,intents:manage,*"} {
		if tok, err := issueCLI(t, nil, "--consumer", "ops", "--abilities", abilities); err != nil || strings.Count(tok, ".") != 2 {
			t.Errorf("token issue --abilities %s = %q, %v", abilities, tok, err)
		}
	}
}

// --ttl above TOKEN_MAX_TTL is refused, not shortened.
func TestTokenIssueTTLAboveMax(t *testing.T) {
	t.Chdir(t.TempDir())
	migrateHere(t, getenvOf(nil))
	_, err := issueCLI(t, nil, "--consumer", "acme", "--abilities", "licenses:read", "--ttl", "8761h")
	wantUsage(t, err, "--ttl")
	if !strings.Contains(err.Error(), "8760h") {
		t.Errorf("err = %q, want the limit named", err)
	}
	vars := map[string]string{"TOKEN_TTL": "1h", "TOKEN_MAX_TTL": "2h"}
	_, err = issueCLI(t, vars, "--consumer", "acme", "--abilities", "licenses:read", "--ttl", "3h")
	wantUsage(t, err, "--ttl")
	if _, err := issueCLI(t, vars, "--consumer", "acme", "--abilities", "licenses:read", "--ttl", "2h"); err != nil {
		t.Errorf("--ttl equal to TOKEN_MAX_TTL: %v", err)
	}
}

func TestTokenIssueBadConsumerNames(t *testing.T) {
	t.Chdir(t.TempDir())
	migrateHere(t, getenvOf(nil))
	if _, err := issueCLI(t, nil, "--consumer", "acme", "--abilities", "licenses:read"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"acme\u202egpj", "ac\u200bme", "ac\x00me", "\xffacme", "ACME"} {
		_, err := issueCLI(t, nil, "--consumer", name, "--abilities", "licenses:read")
		wantUsage(t, err, "--consumer")
	}
	// NFD names the consumer the NFC spelling created.
	if _, err := issueCLI(t, nil, "--consumer", "M\u00fcller", "--abilities", "licenses:read"); err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	if err := Run(context.Background(), []string{"token", "list", "--consumer", "Mu\u0308ller"}, getenvOf(nil), &stdout, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if _, err := issueCLI(t, nil, "--consumer", "Mu\u0308ller", "--abilities", "licenses:read"); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	if err := Run(context.Background(), []string{"token", "list", "--consumer", "Mu\u0308ller"}, getenvOf(nil), &stdout, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if rows := strings.Count(strings.TrimSpace(stdout.String()), "\n"); rows != 2 {
		t.Errorf("token list of the NFD spelling shows %d tokens, want both of Müller's:\n%s", rows, stdout.String())
	}
}

func TestTokenMaxTTLConfigErrors(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, tc := range []struct {
		vars    map[string]string
		mention string
	}{
		{map[string]string{"TOKEN_MAX_TTL": "a while"}, "TOKEN_MAX_TTL"},
		{map[string]string{"TOKEN_MAX_TTL": "720h"}, "TOKEN_TTL"}, // the default TOKEN_TTL, 2160h, is longer
		{map[string]string{"TOKEN_TTL": "48h", "TOKEN_MAX_TTL": "24h"}, "TOKEN_MAX_TTL"},
	} {
		_, err := issueCLI(t, tc.vars, "--consumer", "acme", "--abilities", "licenses:read")
		if err == nil || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("%v: err = %v, want it to name %s", tc.vars, err, tc.mention)
		}
	}
}
