// Package testkit holds the helpers more than one of licensor's test
// packages needs: a settable clock, a buffer that goroutines may share,
// polling with a deadline and a free TCP address.
//
// Only tests may import it: tests/testkit_rule_test.go fails when a
// production package does. It uses the standard library only.
package testkit
