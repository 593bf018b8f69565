package idempotency

import (
	"strings"
	"testing"

	"github.com/licensor-api/licensor/tests/testdb"
)

// The one list refuses an operation it could not finish, run or tell
// apart: the mistake stops the start, not an intent an hour later.
func TestNewOperationsRefusesWhatCannotBeServed(t *testing.T) {
	ok := testOperation("things.store", text(201, "made"))
	noResume := ok
	noResume.Name, noResume.Resume = "things.nores", nil
	noRun := ok
	noRun.Name, noRun.Run = "things.norun", nil
	noName := ok
	noName.Name = ""
	for name, tt := range map[string]struct {
		ops  []AnyOperation
		want string
	}{
		"no resume": {[]AnyOperation{ok, noResume}, `operation "things.nores" has no Resume`},
		"no run":    {[]AnyOperation{noRun}, `operation "things.norun" has no Run`},
		"no name":   {[]AnyOperation{noName}, "has no name"},
		"twice":     {[]AnyOperation{ok, ok}, `operation "things.store" is declared twice`},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := NewOperations(tt.ops...); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("NewOperations = %v, want an error saying %q", err, tt.want)
			}
		})
	}
	list, err := NewOperations(ok, testOperation("things.other", text(201, "x")))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(list.Names(), ","); got != "things.store,things.other" {
		t.Errorf("Names = %s, want the declaration order", got)
	}
}

// A guard needs the list, and serves nothing that is not on it.
func TestGuardServesOnlyDeclaredOperations(t *testing.T) {
	store := NewStore(testdb.New(t, "sqlite").Gorm, testCipher(t))
	if _, err := New(Config{Store: store}); err == nil {
		t.Error("New without Operations succeeded")
	}
	g := newTestGuard(t, Config{Store: store}, testOperation("things.store", text(201, "made")))
	g.MustServe(testOperation("things.store", text(201, "made"))) // declared: no panic
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), `"things.undeclared"`) {
			t.Errorf("mounting an undeclared operation: recover() = %v, want a panic naming it", r)
		}
	}()
	testOperation("things.undeclared", text(201, "x")).Handler(g, headerCall)
}
