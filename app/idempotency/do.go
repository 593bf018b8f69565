package idempotency

import (
	"context"
	"net/http"
)

// DoResult is what the work of a Do call produced (Result is an intent's
// answer, for the intents API): what is stored, and what
// every later call with its key gets back.
type DoResult struct {
	// Status says whether the work had an effect, as an HTTP status does: a
	// 2xx did, and the result is stored and replayed; anything else did not,
	// and the key is released so that a retry runs for real. Zero, with no
	// error, is taken as 200.
	Status int
	// Body is the result's payload, stored sealed like a response body.
	Body []byte
	// Outcome, optional, is kept with the record (the resource made, the
	// reference the other side knows the intent by) and replayed with it.
	Outcome Outcome
}

// doMethod stands in a Do call's fingerprint where a request has its
// method, so that a Do intent never matches a request's under one scope.
const doMethod = "DO"

// Do runs fn once for the intent sc names, for work that is not an HTTP
// request (a webhook, a queue job), with the middleware's guarantee and its
// state machine:
//
//   - the first call reserves the key and runs fn, detached from ctx's
//     cancellation and within the work budget of the lease, and stores a 2xx
//     result;
//   - a call while another runs gets ErrInProgress; a later one gets the
//     stored result with replayed true, and fn does not run;
//   - an error from fn, or a result that is not a 2xx, stores nothing: the
//     key keeps only its fingerprint (a keyless call's is released), so
//     that a retry of the same request runs fn for real and another is
//     refused; the error is returned as it is;
//   - an error that says the outcome is unknown (OutcomeUnknown() true) keeps
//     the intent pending for the reconciler (register a Resumer for the
//     operation), and that call and every later one get a *PendingError;
//   - a record whose owner's lease ran out is taken over, and an expired one
//     is a new intent.
//
// intent is what the work is about (the webhook's or the job's payload, or
// any bytes that fingerprint it; nil for none): it is stored as the
// record's request body, which a Resumer reads to finish a pending intent,
// and a call with the same key but another intent gets ErrKeyReused. JSON is
// compared in canonical form. sc.Key must be 1–255 visible ASCII characters
// (ErrKeyMissing, ErrKeyInvalid). When ctx is done before the call begins,
// nothing is done and ctx's error is returned.
//
// When fn ran, res is what it returned. The errors of the store are the
// middleware's: ErrNotRecorded (nothing was done; retry) and ErrNotKept.
func (g *Guard) Do(ctx context.Context, sc Scope, intent []byte, fn func(ctx context.Context) (DoResult, error)) (res DoResult, replayed bool, err error) {
	return g.do(ctx, sc, intent, func(ctx context.Context, _ *Record) (DoResult, error) { return fn(ctx) })
}

// do is Do, with fn handed the record it runs under.
func (g *Guard) do(ctx context.Context, sc Scope, intent []byte, fn func(ctx context.Context, rec *Record) (DoResult, error)) (res DoResult, replayed bool, err error) {
	switch {
	case sc.Key == "":
		return DoResult{}, false, ErrKeyMissing
	case !validKey(sc.Key):
		return DoResult{}, false, ErrKeyInvalid
	}
	if err := ctx.Err(); err != nil {
		return DoResult{}, false, err
	}
	canonical := Canonical(intent)
	rec := g.makeRecord(sc, Fingerprint(doMethod, sc.Operation, canonical), canonical, "", "")
	stored, err := g.run(&attempt{
		rec:    rec,
		parent: ctx,
		work: func(ctx context.Context) (Response, Outcome, error) {
			r, err := fn(ctx, rec)
			if r.Status == 0 && err == nil {
				r.Status = http.StatusOK
			}
			res = r
			return Response{Status: r.Status, Body: r.Body}, r.Outcome, err
		},
	})
	if stored != nil {
		return resultOf(stored), true, nil
	}
	return res, false, err
}

// resultOf is the DoResult a completed record replays.
func resultOf(r *Record) DoResult {
	status := http.StatusOK
	if r.ResponseStatus != nil {
		status = *r.ResponseStatus
	}
	return DoResult{Status: status, Body: r.ResponseBody, Outcome: Outcome{
		ResourceType: deref(r.ResourceType),
		ResourceID:   deref(r.ResourceID),
		ExternalRef:  deref(r.ExternalRef),
	}}
}
