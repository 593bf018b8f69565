package console

import (
	"context"
	"errors"
	"fmt"
)

// prune is `licensor prune`: one pass deleting expired idempotency records
// and expired consumer events.
func prune(ctx context.Context, e env) error {
	const summary = "Deletes idempotency records older than IDEMPOTENCY_TTL (pending intents are kept) and consumer events older than EVENTS_TTL (those still owed to an endpoint are kept), with their webhook deliveries."
	if ok, err := noArgs(e, "prune", summary); !ok {
		return err
	}
	b, err := loadBase(ctx, e)
	if err != nil {
		return err
	}
	n, others, err := b.Pruner.RunOnceAll(ctx)
	fmt.Fprintf(e.stdout, "%d expired record(s) deleted\n", n)
	fmt.Fprintf(e.stdout, "%d expired consumer event(s) deleted\n", others[prunedEvents])
	return errors.Join(err, b.Close())
}
