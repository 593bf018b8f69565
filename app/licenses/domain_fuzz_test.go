package licenses

import (
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// FuzzNormalizeDomain checks NormalizeDomain on arbitrary input:
//
//   - it never panics; a refused domain comes back as "" with a message;
//   - an accepted domain is lowercase ASCII (punycode): at least two labels
//     of 1–63 of a-z, 0-9 and "-" not starting or ending with "-", at most
//     253 bytes, no trailing dot, the last label not a number (decimal or
//     0x hex, which a URL parser reads as IPv4), not an IP address, and it is
//     exactly the host of http://<domain>/ to net/url, with no port;
//   - it is idempotent: an accepted output normalises to itself;
//   - it never accepts an IP address (v4 or v6, bracketed or not, with or
//     without a port), a port, a scheme, a path, a query or fragment,
//     userinfo, or an empty label; the input is checked for these after NFKC
//     and with the ideographic full stops read as dots, so full-width
//     look-alikes (U+FF1A for ':', U+FF0F for '/', U+3002 for '.') count;
//   - an ordinary ASCII host name is accepted, as itself lowercased, without
//     its trailing dot.
//
// As a test (`go test ./app/licenses -run FuzzNormalizeDomain`) it runs the
// seeds below and those in testdata/fuzz/FuzzNormalizeDomain. To search for
// minutes:
//
//	go test ./app/licenses -run '^$' -fuzz '^FuzzNormalizeDomain$' -fuzztime 3m
func FuzzNormalizeDomain(f *testing.F) {
	for _, seed := range []string{
		"acme.test", "ACME.test.", "  Shop.Example.COM  ", "bücher.example", "xn--bcher-kva.example",
		"a-b.c0.test", "123.example", "shop.xn--p1ai", "a.x0", "a.0xg", "ab--c.test",
		"ＡＣＭＥ．ｔｅｓｔ", "acme。test", "acme.test。", "例え.テスト", "ß.example", "İstanbul.example",
		"\u200d.example", "a\u0301.example", "مثال.إختبار", "a.b.c.d.e.f.g.h",
		strings.Repeat("a", 63) + ".test", strings.Repeat("a", 64) + ".test",
		strings.Repeat(strings.Repeat("a", 62)+".", 4) + "test",
		"", " ", ".", "..", "localhost", "a..test", ".a.test", "a.test..", "-a.test", "a-.test",
		"http://a.test", "https://a.test/x", "a.test/x", "a.test:80", "user@a.test", "user:pw@a.test",
		"a.test?x=1", "a.test#f", "%61.test", "a_b.test", "a b.test",
		"127.0.0.1", "127.0.0.1.", "127.1", "0x7f.1", "0177.0.0.1", "2130706433", "a.0x10", "a.0123",
		"::1", "[::1]", "[::1]:443", "fe80::1%eth0", "::ffff:127.0.0.1", "1.2.3.4:80",
		"１２７．０．０．１", "a.test：80", "a.test／x", "ａ＠b.test", "\uff3b::1\uff3d",
		"a.test\x00", "a\n.test", "a.test\n", "\xff.test", "a.\u2488", "xn--.test", "xn--a.test",
		"XN--BCHER-KVA.EXAMPLE", "xn--bcher-kva.xn--bcher-kva",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		out, msg := NormalizeDomain(raw)
		if msg != "" {
			if out != "" {
				t.Fatalf("NormalizeDomain(%q) refused it (%q) but returned %q", raw, msg, out)
			}
		} else {
			checkHostname(t, raw, out)
			if again, msg := NormalizeDomain(out); msg != "" || again != out {
				t.Fatalf("not idempotent: NormalizeDomain(%q) = %q, but NormalizeDomain(%q) = %q, %q", raw, out, out, again, msg)
			}
		}
		if why := mustRefuse(raw); why != "" && msg == "" {
			t.Fatalf("NormalizeDomain(%q) = %q accepted %s", raw, out, why)
		}
		if want, ok := plainHostname(raw); ok && (msg != "" || out != want) {
			t.Fatalf("NormalizeDomain(%q) = %q, %q; want the plain host name %q accepted", raw, out, msg, want)
		}
	})
}

// checkHostname fails t unless out, which NormalizeDomain accepted for raw,
// has the form of a normalised host name.
func checkHostname(t *testing.T, raw, out string) {
	t.Helper()
	fail := func(why string) { t.Fatalf("NormalizeDomain(%q) = %q: %s", raw, out, why) }
	if len(out) > 253 {
		fail("longer than 253 bytes")
	}
	labels := strings.Split(out, ".")
	if len(labels) < 2 {
		fail("fewer than two labels")
	}
	for _, l := range labels {
		if l == "" {
			fail("an empty label (or a trailing dot)")
		}
		if len(l) > 63 {
			fail("a label longer than 63 bytes")
		}
		if strings.HasPrefix(l, "-") || strings.HasSuffix(l, "-") {
			fail("a label starting or ending with a hyphen")
		}
		if strings.Trim(l, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
			fail("a byte that is not lowercase ASCII a-z, 0-9 or '-'")
		}
	}
	if last := labels[len(labels)-1]; readsAsNumber(last) {
		fail("the last label reads as a number (an IPv4 address to a URL parser)")
	}
	if _, err := netip.ParseAddr(out); err == nil {
		fail("an IP address")
	}
	u, err := url.Parse("http://" + out + "/")
	if err != nil || u.Hostname() != out || u.Port() != "" || u.User != nil || u.Path != "/" {
		fail("not exactly the host of a URL")
	}
}

// readsAsNumber reports whether a URL parser reads the last label as a
// number: all decimal (or octal) digits, or 0x followed by hex digits.
func readsAsNumber(label string) bool {
	allIn := func(s, set string) bool {
		for i := 0; i < len(s); i++ {
			if !strings.Contains(set, s[i:i+1]) {
				return false
			}
		}
		return true
	}
	lower := strings.ToLower(label)
	if hex, ok := strings.CutPrefix(lower, "0x"); ok {
		return allIn(hex, "0123456789abcdef")
	}
	return allIn(lower, "0123456789")
}

// mustRefuse says why raw must be refused ("" when this oracle does not
// insist): after trimming, NFKC and reading the ideographic full stops as
// dots, it holds a scheme, userinfo, a path, query or fragment, a port, an
// IP address, or an empty label.
func mustRefuse(raw string) string {
	s := strings.TrimSpace(raw)
	if s == "" {
		return "an empty domain"
	}
	if utf8.ValidString(s) {
		s = norm.NFKC.String(s)
	}
	s = strings.NewReplacer("\u3002", ".", "\uff0e", ".", "\uff61", ".").Replace(s)
	switch {
	case strings.Contains(s, "://"):
		return "a scheme"
	case strings.Contains(s, "@"):
		return "userinfo"
	case strings.ContainsAny(s, "/\\"):
		return "a path"
	case strings.ContainsAny(s, "?#"):
		return "a query or fragment"
	case strings.Contains(s, ":"):
		return "a port (or an IPv6 address)"
	}
	host := strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(s, "["), "."), "]")
	if _, err := netip.ParseAddr(host); err == nil {
		return "an IP address"
	}
	if _, err := netip.ParseAddrPort(s); err == nil {
		return "an IP address with a port"
	}
	for l := range strings.SplitSeq(strings.TrimSuffix(s, "."), ".") {
		if l == "" {
			return "an empty label"
		}
	}
	return ""
}

// plainHostname returns the normal form of raw when raw, trimmed, is an
// ordinary ASCII host name that NormalizeDomain must accept: two or more
// labels of 1–63 letters, digits and inner hyphens (none with "--" in the
// third and fourth place, which IDNA reserves), at most 253 bytes without
// the one trailing dot it may have, and a last label that is not a number.
func plainHostname(raw string) (string, bool) {
	s := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(raw)), ".")
	if len(s) > 253 {
		return "", false
	}
	labels := strings.Split(s, ".")
	if len(labels) < 2 || readsAsNumber(labels[len(labels)-1]) {
		return "", false
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' ||
			len(l) >= 4 && l[2:4] == "--" ||
			strings.Trim(l, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
			return "", false
		}
	}
	return s, true
}
