package request

import "strings"

// crockford is the alphabet of a ULID as ulid.Make().String() writes it:
// Crockford's base32, upper case, without I, L, O and U.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// IsID reports whether s can be the id of a row licensor made: a license,
// an intent, a token, a webhook endpoint or delivery are ULIDs, 26
// characters whose first is at most 7. Anything else names no row, and is
// refused (404, or the route's answer for an unknown id) before a query:
// MySQL compares an ascii id column with a non-ASCII parameter by raising
// an error, not by finding nothing.
func IsID(s string) bool {
	if len(s) != 26 || s[0] > '7' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(crockford, s[i]) < 0 {
			return false
		}
	}
	return true
}
