package console

import (
	"context"
	"errors"
	"fmt"
)

// prune is `licensor prune`: one pass deleting expired idempotency records.
func prune(ctx context.Context, e env) error {
	const summary = "Deletes idempotency records older than IDEMPOTENCY_TTL (pending intents are kept)."
	if ok, err := noArgs(e, "prune", summary); !ok {
		return err
	}
	b, err := loadBase(ctx, e)
	if err != nil {
		return err
	}
	n, err := b.Pruner.RunOnce(ctx)
	fmt.Fprintf(e.stdout, "%d expired record(s) deleted\n", n)
	return errors.Join(err, b.Close())
}
