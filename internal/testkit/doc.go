// Package testkit holds the helpers more than one of licensor's test
// packages needs: a settable clock, a buffer that goroutines may share,
// polling with a deadline and a free TCP address.
//
// It is an ordinary package so that test files of any package can import
// it, but only tests may: tests/testkit_rule_test.go fails when a
// production package imports it. It uses the standard library only.
package testkit
