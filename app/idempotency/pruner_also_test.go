package idempotency

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/licensor-api/licensor/tests/testdb"
)

// A pass runs the other stores' prunes (Also) after the records', each at
// the pass's time, whatever the others return: RunOnce tells the records'
// count and theirs by name, and joins their errors.
func TestPrunerRunsTheOtherPrunes(t *testing.T) {
	db := testdb.New(t, "sqlite")
	s := NewStore(db.Gorm, testCipher(t), nil, nil)
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var seen []time.Time
	boom := errors.New("boom")
	p := NewPruner(PrunerConfig{Store: s, Now: func() time.Time { return at }, Also: map[string]func(context.Context, time.Time) (int64, error){
		"failing": func(_ context.Context, now time.Time) (int64, error) { seen = append(seen, now); return 0, boom },
		"events":  func(_ context.Context, now time.Time) (int64, error) { seen = append(seen, now); return 3, nil },
	}})
	n, others, err := p.RunOnce(context.Background())
	if n != 0 || others["events"] != 3 || !errors.Is(err, boom) || len(seen) != 2 || !seen[0].Equal(at) || !seen[1].Equal(at) {
		t.Fatalf("RunOnce = %d, %v, %v (prunes ran at %v); want 0, events 3, boom, both at %v", n, others, err, seen, at)
	}
}
