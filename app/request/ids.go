package request

import "regexp"

// ulid is a ULID as ulid.Make().String() writes it: 26 characters of
// Crockford's base32, upper case, without I, L, O and U, the first at most 7.
var ulid = regexp.MustCompile(`^[0-7][0-9A-HJKMNP-TV-Z]{25}$`)

// IsID reports whether s can be the id of a row licensor made: a license,
// an intent, a token, a webhook endpoint or delivery are ULIDs. Anything
// else names no row, and is refused (404, or the route's answer for an
// unknown id) before a query: MySQL compares an ascii id column with a
// non-ASCII parameter by raising an error, not by finding nothing.
func IsID(s string) bool { return ulid.MatchString(s) }
