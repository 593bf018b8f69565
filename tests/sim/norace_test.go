//go:build !race

package sim

// underRace: see race_test.go.
const underRace = false
