//go:build race

package sim

// underRace is set when the tests run with -race. The simulation's harness
// orders its goroutines by synctest.Wait and the schedule alone, an order
// the race detector does not see, so it reports the harness's own state
// (the world's history and steps) as racing: the simulation is not run
// under -race. Licensor's code under it is raced by the tests package.
const underRace = true
