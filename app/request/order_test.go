package request

import (
	"slices"
	"testing"
)

// Laravel's ValidationRuleParser::explodeRules unsets a wildcard rule and
// appends one rule per item (array_merge_recursive), so with the rules
// consumer, abilities, abilities.*, name, expires_in, the bag's keys are
// consumer, abilities, name, expires_in, abilities.0, abilities.1, …
func TestRuleOrderPutsWildcardItemsAfterTheExplicitRules(t *testing.T) {
	fields := map[string][]string{}
	for _, f := range []string{"abilities.10", "expires_in", "abilities.2", "consumer", "name", "other"} {
		fields[f] = []string{"x"}
	}
	got := RuleOrder(fields, IssueTokenRules)
	want := []string{"consumer", "name", "expires_in", "abilities.2", "abilities.10", "other"}
	if !slices.Equal(got, want) {
		t.Errorf("RuleOrder = %v, want %v", got, want)
	}
}
