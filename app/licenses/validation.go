package licenses

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// ValidationError lists what is wrong with the input, field by field.
type ValidationError struct {
	Fields map[string][]string
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("invalid input: %v", slices.Sorted(maps.Keys(e.Fields)))
}

// FieldErrors returns the errors per field.
func (e *ValidationError) FieldErrors() map[string][]string { return e.Fields }

// Validate trims and checks the input, returning it with the domain in its
// normal form. An input Validate returned passes again as it is, so a request
// validated at the edge is not validated a second time in Create.
func Validate(in Input) (Input, error) {
	if in.valid {
		return in, nil
	}
	fields := map[string][]string{}
	in.Name = strings.TrimSpace(in.Name)
	switch n := utf8.RuneCountInString(in.Name); {
	case n == 0:
		fields["name"] = []string{"The name field is required."}
	case n > 255:
		fields["name"] = []string{"The name field must not be greater than 255 characters."}
	}
	domain, msg := NormalizeDomain(in.Domain)
	if msg != "" {
		fields["domain"] = []string{msg}
	}
	in.Domain = domain
	if len(fields) > 0 {
		return in, &ValidationError{Fields: fields}
	}
	in.valid = true
	return in, nil
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
// start nor end with "-", the last not all digits, and no IP address.
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
	return strings.Trim(labels[len(labels)-1], "0123456789") != ""
}
