package auth

import (
	"slices"
	"strings"

	"github.com/licensor-api/licensor/internal/fault"
)

// The abilities a token can carry.
const (
	LicensesRead   = "licenses:read"
	LicensesWrite  = "licenses:write"
	TokensManage   = "tokens:manage"
	IntentsManage  = "intents:manage"  // the operator's view of intents: list, show, retry
	WebhooksManage = "webhooks:manage" // a consumer's own webhook endpoints and their deliveries
	All            = "*"               // every ability
)

// Known lists every ability a token may be issued with.
var Known = []string{LicensesRead, LicensesWrite, WebhooksManage, TokensManage, IntentsManage, All}

// ConsumerAbilities are what a consumer's own token carries.
var ConsumerAbilities = []string{LicensesRead, LicensesWrite, WebhooksManage}

// IsKnown reports whether ability is one licensor knows.
func IsKnown(ability string) bool { return slices.Contains(Known, ability) }

// Can reports whether the abilities grant need; "*" grants everything.
func (a Abilities) Can(need string) bool {
	return slices.Contains(a, All) || slices.Contains(a, need)
}

// CanGrant reports whether a token carrying a may issue a token carrying
// ability, least privilege for admins: a "*" token grants every known
// ability, a "tokens:manage" token only ConsumerAbilities (for any
// consumer), no other token anything. The console is not asked.
func (a Abilities) CanGrant(ability string) bool {
	switch {
	case !IsKnown(ability):
		return false
	case slices.Contains(a, All):
		return true
	case slices.Contains(ConsumerAbilities, ability):
		return slices.Contains(a, TokensManage)
	}
	return false
}

// ErrNotGrantable is what a *NotGrantableError unwraps to.
var ErrNotGrantable error = fault.New("ability_not_grantable", "ability not grantable")

// NotGrantableError names the abilities a granter may not grant; with
// Revoke, those of a token the revoker may not revoke (see Revocable).
type NotGrantableError struct {
	Abilities []string
	Revoke    bool
}

func (e *NotGrantableError) Error() string {
	return "ability not grantable: " + strings.Join(e.Abilities, ", ")
}

// Unwrap is ErrNotGrantable.
func (e *NotGrantableError) Unwrap() error { return ErrNotGrantable }

// Explain is the refusal as the API's 403 and the console's issue form say
// it: what was refused, and what may grant it.
func (e *NotGrantableError) Explain() string {
	refused := "those abilities"
	if len(e.Abilities) > 0 {
		refused = strings.Join(e.Abilities, ", ")
	}
	if e.Revoke {
		return "Your token may not revoke a token holding " + refused + ". A tokens:manage token revokes tokens holding " +
			sentence(ConsumerAbilities) + " only; a token holding an admin ability is revoked by a * token, or at the " +
			"command line (licensor token revoke)."
	}
	return "Your token may not grant " + refused + ". A tokens:manage token grants " +
		sentence(ConsumerAbilities) + " only; admin abilities need a * token."
}

// sentence is a list as a sentence says it: "a, b and c".
func sentence(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

// Grantable returns a *NotGrantableError naming each known ability in want
// that granter may not grant, or nil. Unknown abilities are left to Issue,
// which refuses them as invalid input.
func Grantable(granter Abilities, want []string) error {
	var refused []string
	for _, ability := range want {
		if IsKnown(ability) && !granter.CanGrant(ability) && !slices.Contains(refused, ability) {
			refused = append(refused, ability)
		}
	}
	if len(refused) > 0 {
		return &NotGrantableError{Abilities: refused}
	}
	return nil
}

// Revocable returns a *NotGrantableError (Revoke set) when the token
// revokerID, carrying revoker, may not revoke target. It is Grantable's
// rule the other way, so only a * token revokes one holding an admin
// ability (a peer admin's token cannot be revoked to lock its operator
// out). A token may always revoke itself: that takes no ability.
func Revocable(revokerID string, revoker Abilities, target Token) error {
	if target.ID == revokerID || slices.Contains(revoker, All) {
		return nil
	}
	var refused []string
	for _, ability := range target.Abilities {
		if !revoker.CanGrant(ability) && !slices.Contains(refused, ability) {
			refused = append(refused, ability)
		}
	}
	if len(refused) > 0 {
		return &NotGrantableError{Abilities: refused, Revoke: true}
	}
	return nil
}
