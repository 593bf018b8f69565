package licenses

import (
	"net/netip"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/idna"

	"github.com/licensor-api/licensor/internal/fault"
)

// ValidationError is the input's field errors, in rule order (name, then
// domain). The name stays while app/operations names it.
type ValidationError = fault.Fields

// Validate trims and checks the input, returning it with the domain in its
// normal form: what Create expects. A request is validated once, at the
// edge (package request); a stored one again when it is resumed.
func Validate(in Input) (Input, error) {
	verr := &ValidationError{}
	in.Name = strings.TrimSpace(in.Name)
	if msg := nameProblem(in.Name); msg != "" {
		verr.Add("name", msg)
	}
	domain, msg := NormalizeDomain(in.Domain)
	if msg != "" {
		verr.Add("domain", msg)
	}
	in.Domain = domain
	return in, verr.Err()
}

// nameProblem says what is wrong with a trimmed license name, "" when
// nothing is. Control and format characters (Cc, Cf: bidirectional and
// zero-width ones) are refused: they make one name display as another.
func nameProblem(name string) string {
	switch {
	case !utf8.ValidString(name):
		return "The name field must be valid UTF-8."
	case name == "":
		return "The name field is required."
	case utf8.RuneCountInString(name) > 255:
		return "The name field must not be greater than 255 characters."
	case strings.ContainsFunc(name, func(r rune) bool { return unicode.In(r, unicode.Cc, unicode.Cf) }):
		return "The name field must not contain control characters, bidirectional controls or zero-width characters."
	}
	return ""
}

const domainInvalid = "The domain field must be a valid domain name, such as acme.test (no scheme, path, port or IP address)."

// domainProfile converts internationalised names to their ASCII (punycode)
// form with the lookup rules browsers use.
var domainProfile = idna.New(idna.MapForLookup(), idna.BidiRule(), idna.StrictDomainName(true), idna.VerifyDNSLength(true))

// NormalizeDomain returns the domain lowercased, without a trailing dot and
// in ASCII (punycode) form, or a message saying why it is not a hostname.
func NormalizeDomain(raw string) (string, string) {
	s := strings.TrimSpace(raw)
	if s == "" {
		return "", "The domain field is required."
	}
	if len(s) > 1024 || strings.ContainsAny(s, "/\\:@?#[] \t\r\n%") {
		return "", domainInvalid
	}
	s = strings.TrimSuffix(s, ".")
	ascii, err := domainProfile.ToASCII(strings.ToLower(s))
	if err != nil {
		return "", domainInvalid
	}
	if !isHostname(ascii) {
		return "", domainInvalid
	}
	return ascii, ""
}

// isHostname checks the rules that hold after conversion: at most 253
// characters, at least two labels of 1–63 of a-z, 0-9 and "-" that neither
// start nor end with "-", the last not a number, and no IP address.
func isHostname(s string) bool {
	if len(s) > 253 {
		return false
	}
	if _, err := netip.ParseAddr(s); err == nil {
		return false
	}
	labels := strings.Split(s, ".")
	if len(labels) < 2 {
		return false
	}
	for _, l := range labels {
		if len(l) == 0 || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return !isNumber(labels[len(labels)-1])
}

// isNumber reports whether a label reads as a number to a URL parser
// (decimal, octal, or hex with 0x): a host ending in one is taken for an
// IPv4 address ("x.0x10", "a.0123").
func isNumber(label string) bool {
	digits := "0123456789"
	if rest, ok := strings.CutPrefix(label, "0x"); ok {
		label, digits = rest, "0123456789abcdef"
	}
	return strings.Trim(label, digits) == ""
}
