package licenses

import (
	"strings"
	"testing"
)

func TestNormalizeDomain(t *testing.T) {
	good := []struct{ in, want string }{
		{"acme.test", "acme.test"},
		{"ACME.test.", "acme.test"},
		{"  Shop.Example.COM  ", "shop.example.com"},
		{"bücher.example", "xn--bcher-kva.example"},
		{"xn--bcher-kva.example", "xn--bcher-kva.example"},
		{"a-b.c0.test", "a-b.c0.test"},
		{"a.test\n", "a.test"},
		{"123.example", "123.example"},
		{strings.Repeat("a", 63) + ".test", strings.Repeat("a", 63) + ".test"},
	}
	for _, tt := range good {
		got, msg := NormalizeDomain(tt.in)
		if msg != "" || got != tt.want {
			t.Errorf("NormalizeDomain(%q) = %q, %q; want %q", tt.in, got, msg, tt.want)
		}
	}
	bad := []string{
		"", "   ", "localhost", "http://a.test", "https://a.test/x", "a.test/x", "a.test:80",
		"user@a.test", "127.0.0.1", "::1", "[::1]", "a..test", ".a.test", "a.test..",
		"-a.test", "a-.test", "a.123", "a_b.test", "a b.test", "a.test?x=1", "a.test#f",
		strings.Repeat("a", 64) + ".test",
		strings.Repeat(strings.Repeat("a", 60)+".", 5) + "test", // 305 characters
		"'; DROP TABLE licenses;--", "a.test\x00", "a\n.test", "%61.test",
	}
	for _, in := range bad {
		if got, msg := NormalizeDomain(in); msg == "" {
			t.Errorf("NormalizeDomain(%q) = %q, accepted; want refused", in, got)
		}
	}
}

func TestValidate(t *testing.T) {
	_, err := Validate(Input{Name: "  ", Domain: "http://x"})
	ve, ok := err.(*ValidationError)
	if !ok || len(ve.Fields["name"]) != 1 || len(ve.Fields["domain"]) != 1 {
		t.Fatalf("Validate = %v, want name and domain errors", err)
	}
	if _, err := Validate(Input{Name: strings.Repeat("é", 256), Domain: "a.test"}); err == nil {
		t.Error("a 256-character name was accepted")
	}
	in, err := Validate(Input{Name: " Acme ", Domain: "ACME.test."})
	if err != nil || in.Name != "Acme" || in.Domain != "acme.test" {
		t.Errorf("Validate = %+v, %v", in, err)
	}
}
