package tests

import (
	"testing"

	"github.com/anishathalye/porcupine"
)

// robustSeq is a history of operations one after the other, none
// concurrent: each op's call is just after the previous one's return.
func robustSeq(ops ...robustIO) []porcupine.Operation {
	var h []porcupine.Operation
	for i, o := range ops {
		o.in.Op = i
		if o.in.Domain == "" {
			o.in.Domain = "a.test"
		}
		h = append(h, porcupine.Operation{ClientId: i, Input: o.in, Output: o.out, Call: int64(2 * i), Return: int64(2*i + 1)})
	}
	return h
}

// robustIO is an operation and its answer.
type robustIO struct {
	in  robustInput
	out robustOutput
}

// TestRobustModel holds the history checker's model to the promises it
// encodes: histories the API may produce pass, and each broken promise
// the mutants re-introduce fails.
func TestRobustModel(t *testing.T) {
	create := func(consumer, key string, status int, id string) robustIO {
		return robustIO{robustInput{Kind: robustCreate, Consumer: consumer, Key: key, Name: "A"}, robustOutput{Status: status, ID: id, LStatus: "active"}}
	}
	revoke := func(consumer, id string, status int) robustIO {
		return robustIO{robustInput{Kind: robustRevoke, Consumer: consumer, ID: id}, robustOutput{Status: status}}
	}
	list := func(consumer, id string) robustIO {
		return robustIO{robustInput{Kind: robustList, Consumer: consumer}, robustOutput{Status: 200, ID: id, LStatus: "active"}}
	}
	replayed := func(io robustIO) robustIO { io.out.Replayed = true; return io }
	taken := robustIO{robustInput{Kind: robustCreate, Consumer: "b", Name: "A"}, robustOutput{Status: 409, Code: "domain_taken"}}
	cases := map[string]struct {
		ops  []robustIO
		want bool
	}{
		"create, replay, taken, revoke":   {[]robustIO{create("a", "k1", 201, "L1"), replayed(create("a", "k1", 201, "L1")), taken, revoke("a", "L1", 204), list("a", "")}, true},
		"a pending create settles later":  {[]robustIO{create("a", "", 202, ""), list("a", ""), list("a", "L9")}, true},
		"a lost answer took effect":       {[]robustIO{create("a", "k1", 0, ""), create("a", "", 200, "L3"), replayed(create("a", "k1", 201, "L3"))}, true},
		"an unknown revoke settles later": {[]robustIO{create("a", "", 201, "L1"), revoke("a", "L1", 202), list("a", "L1"), create("a", "", 201, "L2")}, true},
		"the vendor deleted the site": {[]robustIO{create("a", "", 201, "L1"),
			{robustInput{Kind: robustVendorDelete, ID: "L1"}, robustOutput{Status: 200}}, list("a", "L1"), create("b", "", 201, "L2")}, true},
		// mutant 1: a revoke leaves the consumer's pending create open, which
		// brings the domain back.
		"a revoked domain comes back": {[]robustIO{create("a", "", 202, ""), create("a", "", 201, "L1"), revoke("a", "L1", 204), list("a", "L2")}, false},
		// mutant 2: a no-effect 200 stored under its key.
		"a 200 replayed":             {[]robustIO{create("a", "", 201, "L1"), create("a", "k2", 200, "L1"), replayed(create("a", "k2", 200, "L1"))}, false},
		"a stored 201 answered anew": {[]robustIO{create("a", "k1", 201, "L1"), revoke("a", "L1", 204), create("a", "k1", 201, "L2")}, false},
		"two licenses at once":       {[]robustIO{create("a", "", 201, "L1"), create("b", "", 201, "L2")}, false},
		"a 200 of a revoked license": {[]robustIO{create("a", "", 201, "L1"), revoke("a", "L1", 204), create("a", "", 200, "L1")}, false},
		"taken while free":           {[]robustIO{taken}, false},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			res, _ := porcupine.CheckOperationsVerbose(robustModel, robustSeq(c.ops...), 0)
			if got := res == porcupine.Ok; got != c.want {
				t.Errorf("linearizable = %v (%s), want %v", got, res, c.want)
			}
		})
	}
}
