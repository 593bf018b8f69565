package idempotency

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"

	"github.com/licensor-api/licensor/internal/ptr"
)

// Operation is a guarded write, declared once: it serves its route (Serve)
// and other callers (Do), and the reconciler resumes it by its name.
type Operation[In any] struct {
	// Name names the operation in records, logs and metrics
	// ("licenses.store"). Unique among the application's operations.
	Name string
	// Subject, when set, names what an intent is about within its consumer
	// (a create: its domain). Once an intent finishes, the consumer's older
	// open intents of the operation about the same subject are superseded.
	Subject func(in In) string
	// Run does the work as the intent's owner, through x's phases. A 2xx
	// answer it did not Finish is stored, unless NoEffect; an OutcomeUnknown
	// error keeps the intent pending; any other error or status had no
	// effect. What the answer names is kept even beside an error: a pending
	// intent is known by it.
	Run func(ctx context.Context, x *Execution, in In) (Response, error)
	// Resume finishes, for the reconciler, an intent whose work may have
	// reached the vendor, from its record, as Run does; done false: nothing
	// found yet, and mayCreate was false. An error wrapping ErrSuperseded
	// settles it as superseded, one wrapping ErrAbandon fails it for good.
	// Required: an intent that can be pending must be finishable.
	Resume func(ctx context.Context, x *Execution, rec *Record, mayCreate bool) (resp Response, done bool, err error)
	// RetryOnly says an operator may retry a failed intent of it but never
	// discard it: repeating it is always safe, and its resource waits on it
	// (a revoke's license stays revoking until the revoke ends).
	RetryOnly bool
	// BeforeDiscard, when set, runs before an operator discards an intent
	// whose work may have reached the vendor, to make sure the vendor keeps
	// nothing for it that nobody holds. An error stops the discard.
	BeforeDiscard func(ctx context.Context, rec *Record) error
}

// AnyOperation is an Operation of any input type. Only Operation
// implements it.
type AnyOperation interface {
	declared() declared
}

// declared is what the guard and the reconciler keep of an operation.
type declared struct {
	name          string
	ok            error // nil: the declaration can be served
	resume        func(ctx context.Context, x *Execution, rec *Record, mayCreate bool) (Response, bool, error)
	retryOnly     bool
	beforeDiscard func(ctx context.Context, rec *Record) error
}

func (op Operation[In]) declared() declared {
	d := declared{name: op.Name, resume: op.Resume, retryOnly: op.RetryOnly, beforeDiscard: op.BeforeDiscard}
	switch {
	case op.Name == "":
		d.ok = errors.New("an operation has no name")
	case op.Run == nil:
		d.ok = fmt.Errorf("operation %q has no Run", op.Name)
	case op.Resume == nil:
		d.ok = fmt.Errorf("operation %q has no Resume: a pending intent of it could never be finished", op.Name)
	}
	return d
}

// Operations is the application's one list of guarded operations: for the
// guard, the reconciler and the metrics.
type Operations struct {
	names  []string
	byName map[string]declared
}

// NewOperations checks the operations (a unique name, a Run, a Resume), so
// that a wiring mistake stops the process at start-up, not an hour later.
func NewOperations(ops ...AnyOperation) (*Operations, error) {
	o := &Operations{byName: make(map[string]declared, len(ops))}
	for _, op := range ops {
		d := op.declared()
		if d.ok != nil {
			return nil, d.ok
		}
		if _, dup := o.byName[d.name]; dup {
			return nil, fmt.Errorf("operation %q is declared twice", d.name)
		}
		o.names = append(o.names, d.name)
		o.byName[d.name] = d
	}
	return o, nil
}

// Names are the operations' names, in declaration order.
func (o *Operations) Names() []string { return slices.Clone(o.names) }

// RetryOnly are the names of the operations declared RetryOnly.
func (o *Operations) RetryOnly() []string {
	var out []string
	for _, name := range o.names {
		if o.byName[name].retryOnly {
			out = append(out, name)
		}
	}
	return out
}

func (o *Operations) lookup(name string) (declared, bool) {
	if o == nil {
		return declared{}, false
	}
	d, ok := o.byName[name]
	return d, ok
}

// Operations are the operations g serves.
func (g *Guard) Operations() *Operations { return g.cfg.Operations }

// MustServe panics unless op is one of g's operations: a wiring mistake is
// found when the routes are built, not when an intent waits for a resumer.
func (g *Guard) MustServe(op AnyOperation) {
	name := op.declared().name
	if _, ok := g.cfg.Operations.lookup(name); !ok {
		panic(fmt.Sprintf("idempotency: operation %q is not among the guard's operations", name))
	}
}

// Request is one HTTP request for an operation, in plain values.
type Request struct {
	Caller
	Method   string
	Route    string // the route's pattern; with Method, part of the fingerprint
	Path     string // as sent, ids and all: what a replay without a parse compares; "" is Route
	Key      string // "" for none; see Guard.HeaderKey
	Body     []byte
	Prefetch *Prefetch // nil, or the record as the token row's statement read it
}

// Serve runs one request for op through the guard. A retry with the same
// bytes is replayed at once; else bind gives the input and the canonical
// form of the fields that make the intent (nil: the whole body; an error is
// the answer, before any record is made). It returns the answer, the
// guard's decision as log attributes (nil for none), and the error to
// answer with instead.
func (op Operation[In]) Serve(ctx context.Context, g *Guard, r Request, bind func(body []byte) (In, []byte, error)) (Response, []slog.Attr, error) {
	if r.Key != "" && !validKey(r.Key) {
		return Response{}, nil, ErrKeyInvalid
	}
	hash := bodyHash(r.Method, cmp.Or(r.Path, r.Route), r.Body)
	sc := scope{ConsumerID: r.ConsumerID, Operation: op.Name, Key: r.Key}
	var prior lookup
	if r.Key != "" {
		fast, prefetched := r.Prefetch.lookup(sc)
		if !prefetched {
			fast = g.lookup(ctx, sc) // the whole record
		}
		if fast.replayable(hash, g.now) {
			if fast.cached {
				g.cache.hits.Add(1)
			} else {
				g.cache.put(fast.rec)
			}
			resp, err := stored(fast.rec)
			return resp, g.note(fast.rec, "replayed"), err
		}
		prior = fast
		if prefetched && fast.rec != nil { // a replay's columns of a record this request does not replay: the whole of it decides
			prior = g.lookup(ctx, sc)
		}
	}
	in, intent, err := bind(r.Body)
	if err != nil {
		return Response{}, nil, err
	}
	canonical := canonicalJSON(r.Body)
	if intent == nil {
		intent = canonical
	}
	rec := g.makeRecord(sc, fingerprint(r.Method, r.Route, intent), canonical, r.TokenID, r.RequestID)
	rec.BodyHash = &hash
	if op.Subject != nil {
		rec.Subject = ptr.OrNil(op.Subject(in))
	}
	a := &attempt{rec: rec, prior: prior, parent: ctx, caller: r.Caller,
		work: func(ctx context.Context, x *Execution) (Response, error) { return op.Run(ctx, x, in) }}
	var resp Response
	if r.Key == "" { // the server makes the key: the intent is on the record all the same
		resp, err = g.unkeyed(a)
	} else {
		resp, _, err = g.run(a)
	}
	return resp, a.noted, err
}

// doMethod stands in a Do call's fingerprint where a request has its
// method, so that a Do intent never matches a request's under one scope.
const doMethod = "DO"

// Do runs op once for the intent key names, for work that is not an HTTP
// request, with Serve's state machine (a later call is replayed). intent is
// what the work is about (nil for none), stored for Resume and compared in
// canonical form. When ctx is done before the call begins, nothing is done.
func (op Operation[In]) Do(ctx context.Context, g *Guard, caller Caller, key string, in In, intent []byte) (resp Response, replayed bool, err error) {
	g.MustServe(op)
	var subject *string
	if op.Subject != nil {
		subject = ptr.OrNil(op.Subject(in))
	}
	return g.do(ctx, caller, scope{ConsumerID: caller.ConsumerID, Operation: op.Name, Key: key}, intent, subject,
		func(ctx context.Context, x *Execution) (Response, error) { return op.Run(ctx, x, in) })
}

func (g *Guard) do(ctx context.Context, caller Caller, sc scope, intent []byte, subject *string, work func(ctx context.Context, x *Execution) (Response, error)) (Response, bool, error) {
	switch {
	case sc.Key == "":
		return Response{}, false, ErrKeyMissing
	case !validKey(sc.Key):
		return Response{}, false, ErrKeyInvalid
	}
	if err := ctx.Err(); err != nil {
		return Response{}, false, err
	}
	canonical := canonicalJSON(intent)
	rec := g.makeRecord(sc, fingerprint(doMethod, sc.Operation, canonical), canonical, "", "") // no request to correlate
	rec.Subject = subject
	return g.run(&attempt{rec: rec, parent: ctx, caller: caller,
		work: func(ctx context.Context, x *Execution) (Response, error) {
			resp, err := work(ctx, x)
			if resp.Status == 0 && err == nil {
				resp.Status = http.StatusOK
			}
			return resp, err
		}})
}
