package request

import "testing"

// IsForm is asked of every request with a body: a JSON one must cost
// no parse and no allocation (it cost 120 ns and one allocation).
func BenchmarkIsFormJSON(b *testing.B) {
	for b.Loop() {
		IsForm("application/json")
	}
}
