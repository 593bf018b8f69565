package request

import (
	"slices"
	"strconv"
	"strings"
)

// RuleOrder is the order of a 422's fields, the one place that decides it:
// Laravel's. Its validator (ValidationRuleParser::explodeRules) replaces a
// wildcard rule ("x.*") by one rule per item, x.0, x.1, …, appended after
// the rules already listed, and the message bag follows the rules. So the
// fields of the explicit rules come first, in their order; then, for each
// wildcard rule in its order, its items by index; then any other field,
// sorted.
func RuleOrder(fields map[string][]string, rules []string) []string {
	var out, wildcards []string
	for _, r := range rules {
		if prefix, isItems := strings.CutSuffix(r, ".*"); isItems {
			wildcards = append(wildcards, prefix)
		} else if _, ok := fields[r]; ok {
			out = append(out, r)
		}
	}
	for _, prefix := range wildcards {
		out = append(out, items(fields, prefix)...)
	}
	var rest []string
	for f := range fields {
		if !slices.Contains(out, f) {
			rest = append(rest, f)
		}
	}
	slices.Sort(rest)
	return append(out, rest...)
}

// items is the fields prefix.N of fields, by N.
func items(fields map[string][]string, prefix string) []string {
	var out []string
	for f := range fields {
		if rest, ok := strings.CutPrefix(f, prefix+"."); ok {
			if _, err := strconv.Atoi(rest); err == nil {
				out = append(out, f)
			}
		}
	}
	slices.SortFunc(out, func(a, b string) int {
		x, _ := strconv.Atoi(a[len(prefix)+1:])
		y, _ := strconv.Atoi(b[len(prefix)+1:])
		return x - y
	})
	return out
}
