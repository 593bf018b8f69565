package auth

import (
	"slices"
	"strings"

	"github.com/licensor-api/licensor/internal/fault"
)

// The abilities a token can carry.
const (
	LicensesRead  = "licenses:read"
	LicensesWrite = "licenses:write"
	TokensManage  = "tokens:manage"
	IntentsManage = "intents:manage" // the operator's view of intents: list, show, retry
	// WebhooksManage is a consumer's: its own webhook endpoints and their
	// deliveries.
	WebhooksManage = "webhooks:manage"
	All            = "*" // every ability
)

// Known lists every ability a token may be issued with.
var Known = []string{LicensesRead, LicensesWrite, WebhooksManage, TokensManage, IntentsManage, All}

// ConsumerAbilities are what a consumer's own token carries: its licenses
// and its webhook endpoints.
var ConsumerAbilities = []string{LicensesRead, LicensesWrite, WebhooksManage}

// AdminAbilities are the operator's: managing tokens and intents, and "*".
var AdminAbilities = []string{TokensManage, IntentsManage, All}

// IsKnown reports whether ability is one licensor knows.
func IsKnown(ability string) bool { return slices.Contains(Known, ability) }

// Can reports whether the abilities grant need; "*" grants everything.
func (a Abilities) Can(need string) bool {
	return slices.Contains(a, All) || slices.Contains(a, need)
}

// CanGrant reports whether a token carrying a may issue a token carrying
// ability. It is least privilege for admins: a "*" token may grant every
// known ability; a "tokens:manage" token only the consumer abilities
// (licenses:read, licenses:write), for any consumer; no other token may
// grant anything. An unknown ability is never grantable. The operator at
// the command line holds no token and is not asked.
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

// ErrNotGrantable is what Grantable's *NotGrantableError unwraps to: its
// code, ability_not_grantable.
var ErrNotGrantable error = fault.New("ability_not_grantable", "ability not grantable")

// NotGrantableError names the abilities a granter asked for and may not
// grant; or, when Revoke is set, those a token to be revoked holds and the
// revoker may not grant (see Revocable).
type NotGrantableError struct {
	Abilities []string
	Revoke    bool
}

func (e *NotGrantableError) Error() string {
	return "ability not grantable: " + strings.Join(e.Abilities, ", ")
}

// Unwrap is ErrNotGrantable.
func (e *NotGrantableError) Unwrap() error { return ErrNotGrantable }

// Explain is the refusal in the words the API's 403 ability_not_grantable
// and the console's issue form both say: what was refused, and what may
// grant it.
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
// that granter may not grant (see CanGrant), nil when there is none.
// Unknown abilities are left to Issue, which refuses them as invalid input.
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
// revokerID, carrying revoker, may not revoke target, nil when it may. It is
// Grantable's rule the other way: a token may revoke a token only if it may
// grant every ability that token holds, so a tokens:manage token revokes
// consumers' tokens and only a * token revokes one holding an admin ability
// (a peer admin's token cannot be revoked to lock its operator out). A token
// may always revoke itself: that gives up its own abilities and takes none.
// The operator at the command line holds no token and is not asked.
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
