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
		{"shop.xn--p1ai", "shop.xn--p1ai"}, {"a.x0", "a.x0"}, {"a.0xg", "a.0xg"},
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
		"x.0x10", "x.0X1f", "a.0x", "a.0123", // the last label read as a number: an IPv4 address to a URL parser
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

func TestValidateRefusesInvisibleCharactersInName(t *testing.T) {
	bad := map[string]string{
		"NUL":                    "Acme\x00",
		"bell":                   "Acme\a",
		"tab inside":             "Ac\tme",
		"newline inside":         "Acme\nCorp",
		"escape sequence":        "Acme\x1b[31m",
		"DEL":                    "Acme\x7f",
		"NEL (C1)":               "Ac\u0085me",
		"right-to-left override": "Acme\u202Etxt.exe",
		"left-to-right override": "\u202DAcme",
		"right-to-left isolate":  "Acme\u2067x\u2069",
		"right-to-left mark":     "Acme\u200F",
		"zero-width space":       "Ac\u200Bme",
		"zero-width joiner":      "Ac\u200Dme",
		"zero-width non-joiner":  "Ac\u200Cme",
		"byte order mark":        "\uFEFFAcme",
		"soft hyphen":            "Ac\u00ADme",
		"word joiner":            "Ac\u2060me",
		"arabic letter mark":     "Acme\u061C",
		"interlinear annotation": "Acme\uFFF9",
		"tag character":          "Acme\U000E0041",
	}
	for name, in := range bad {
		_, err := Validate(Input{Name: in, Domain: "acme.test"})
		ve, ok := err.(*ValidationError)
		if !ok || len(ve.Fields["name"]) != 1 || !strings.Contains(ve.Fields["name"][0], "control characters") {
			t.Errorf("%s (%q): Validate = %v, want the name refused", name, in, err)
		}
	}
}

func TestValidateRefusesInvalidUTF8Name(t *testing.T) {
	for _, in := range []string{"Acme\xff", "\xc3\x28", "Acme\xed\xa0\x80"} { // a stray byte, a bad sequence, a surrogate
		_, err := Validate(Input{Name: in, Domain: "acme.test"})
		ve, ok := err.(*ValidationError)
		if !ok || len(ve.Fields["name"]) != 1 || !strings.Contains(ve.Fields["name"][0], "UTF-8") {
			t.Errorf("Validate(%q) = %v, want the name refused as invalid UTF-8", in, err)
		}
	}
}

func TestValidateKeepsOrdinaryNames(t *testing.T) {
	for _, in := range []string{"Acme", "Müller GmbH", "株式会社アクメ", "שלום", "Acme ✓ 🚀", "O'Brien & Sons (EU)", "  padded\t\n"} {
		out, err := Validate(Input{Name: in, Domain: "acme.test"})
		if err != nil || out.Name != strings.TrimSpace(in) {
			t.Errorf("Validate(%q) = %q, %v; want it accepted, trimmed", in, out.Name, err)
		}
	}
}
