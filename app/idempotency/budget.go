package idempotency

import (
	"context"
	"time"
)

// WorkBudget is how long the owner of a lease may work: the work ends a fifth
// of the lease before the lease does, so that the owner always settles its
// record before anyone may take it over. This is the one place the rule is
// set; every deadline on owned work (the middleware's, the keyless path's, an
// unguarded write's, the reconciler's) derives from it.
func WorkBudget(lease time.Duration) time.Duration { return lease - lease/5 }

// workDeadline is when the work under a lease of length lease, ending at
// leaseEnd on the service's clock (now on that clock), must stop: a real
// time, as context deadlines are, whatever clock the service runs on. Time
// already spent since the lease began comes out of the budget.
func workDeadline(leaseEnd, now time.Time, lease time.Duration) time.Time {
	return time.Now().Add(leaseEnd.Sub(now) + WorkBudget(lease) - lease)
}

// detach returns the context owned work runs on: it keeps parent's values
// but not its cancellation, so that a client hanging up cannot cut the work
// short between the vendor's answer and the write that records it, and it
// ends at deadline. It is the one place a request is detached from its client.
func detach(parent context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	return context.WithDeadline(context.WithoutCancel(parent), deadline)
}
