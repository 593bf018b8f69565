package idempotency

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/licensor-api/licensor/tests/testdb"
)

// A pass runs the other stores' prunes (Also) after the records', each at
// the pass's time, whatever the others return: RunOnceAll tells their
// counts by name and joins their errors; RunOnce the records' count.
func TestPrunerRunsTheOtherPrunes(t *testing.T) {
	db := testdb.New(t, "sqlite")
	s := NewStore(db.Gorm, testCipher(t))
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var seen []time.Time
	boom := errors.New("boom")
	p := NewPruner(PrunerConfig{Store: s, Now: func() time.Time { return at }, Also: []PruneFunc{
		{Name: "failing", Prune: func(_ context.Context, now time.Time) (int64, error) { seen = append(seen, now); return 0, boom }},
		{Name: "events", Prune: func(_ context.Context, now time.Time) (int64, error) { seen = append(seen, now); return 3, nil }},
	}})
	n, others, err := p.RunOnceAll(context.Background())
	if n != 0 || others["events"] != 3 || !errors.Is(err, boom) || len(seen) != 2 || !seen[0].Equal(at) || !seen[1].Equal(at) {
		t.Fatalf("RunOnceAll = %d, %v, %v (prunes ran at %v); want 0, events 3, boom, both at %v", n, others, err, seen, at)
	}
	if n, err := p.RunOnce(context.Background()); n != 0 || !errors.Is(err, boom) || len(seen) != 4 {
		t.Errorf("RunOnce = %d, %v after %d prunes, want 0, boom, 4", n, err, len(seen))
	}
}
