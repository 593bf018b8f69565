package auth

import "slices"

// The abilities a token can carry.
const (
	LicensesRead  = "licenses:read"
	LicensesWrite = "licenses:write"
	TokensManage  = "tokens:manage"
	IntentsManage = "intents:manage" // the operator's view of intents: list, show, retry
	All           = "*"              // every ability
)

// Known lists every ability a token may be issued with.
var Known = []string{LicensesRead, LicensesWrite, TokensManage, IntentsManage, All}

// IsKnown reports whether ability is one licensor knows.
func IsKnown(ability string) bool { return slices.Contains(Known, ability) }

// Can reports whether the abilities grant need; "*" grants everything.
func (a Abilities) Can(need string) bool {
	return slices.Contains(a, All) || slices.Contains(a, need)
}
