package console

import (
	"context"
	"errors"
	"fmt"
)

func prune(ctx context.Context, e env) error {
	const summary = "Deletes idempotency records older than IDEMPOTENCY_TTL (pending intents are kept) and consumer events older than EVENTS_TTL (those still owed to an endpoint are kept), with their webhook deliveries, and the activity counters' hours older than 7 days."
	if ok, err := noArgs(e, "prune", summary); !ok {
		return err
	}
	b, err := loadBase(ctx, e)
	if err != nil {
		return err
	}
	n, others, err := b.Pruner.RunOnce(ctx)
	fmt.Fprintf(e.stdout, "%d expired record(s) deleted\n", n)
	fmt.Fprintf(e.stdout, "%d expired consumer event(s) deleted\n", others[prunedEvents])
	fmt.Fprintf(e.stdout, "%d activity hour(s) older than 7 days deleted\n", others[prunedActivity])
	return errors.Join(err, b.Close())
}
