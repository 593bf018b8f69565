package idempotency

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"
)

// Call is who asks for an operation's work: what the work knows of its
// request beyond the input. The HTTP layer makes it from the principal; a
// Do caller (a webhook, a job) makes its own.
type Call struct {
	ConsumerID string // scopes the key
	TokenID    string // the token that asked, "" for none
	RequestID  string // the request's id, kept as the record's correlation id
	owner      *owner // the record the work executes under (Started, Complete); nil outside the guard
}

// Operation is a guarded write, declared once where its domain lives: its
// name, how it binds its input, how it runs, and how a pending one is
// resumed. The same value mounts its route (Serve), runs a call that is not
// a request (Do), and is what the reconciler resumes by its name.
type Operation[In any] struct {
	// Name names the operation in records, logs and metrics
	// ("licenses.store"). Unique among the application's operations.
	Name string
	// Key, when set, takes the intent's key from the request itself, for an
	// operation whose intent the URL names (a revoke: the license's id); the
	// Idempotency-Key header is then not read.
	Key func(c echo.Context) string
	// Bind parses and validates the request body, once: the input Run is
	// handed, and the canonical form of just the fields that make the intent
	// (its fingerprint), so that volatile metadata a client adds does not
	// turn a retry into a conflict. A nil intent is the whole canonical body.
	// An error is the answer as it is, given before any record is made. Nil
	// Bind: the zero input, and the whole canonical body as the intent.
	Bind func(c echo.Context, body []byte) (in In, intent []byte, err error)
	// Subject, when set, names what an intent is about within its consumer
	// (a create: its domain). Once an intent completes (Call.Complete), the
	// consumer's older open intents of the operation about the same subject
	// are superseded: settled, never executed.
	Subject func(in In) string
	// Run does the work as the intent's owner, detached from the client and
	// within the work budget of the lease. Before it may reach the vendor it
	// calls call.Started (the recovery point); it completes the record in the
	// transaction of its local writes (call.Complete) and says so with
	// Outcome.Kept, or leaves a 2xx Response to be stored after it. An
	// Outcome with NoEffect is answered, not stored; an error that says the
	// outcome is unknown (OutcomeUnknown) keeps the intent pending; any other
	// error or status had no effect and stores nothing (the key keeps its
	// fingerprint: the same request runs again for real). The Outcome is kept
	// with the record, even beside an error (a pending intent is known by it).
	Run func(ctx context.Context, call Call, in In) (Response, Outcome, error)
	// Resume finishes, for the reconciler, an intent of this operation whose
	// work may have reached the vendor (pending, or its owner died after
	// Started), from its record; call completes it as Run's does. Required:
	// an intent that can be pending must be finishable. An error wrapping
	// ErrSuperseded settles it as superseded.
	Resume func(ctx context.Context, call Call, rec *Record, mayCreate bool) (Resumption, error)
	// RetryOnly says an operator may retry a failed intent of it but never
	// discard it: repeating it is always safe, and its resource waits on it
	// (a revoke's license stays revoking until the revoke ends).
	RetryOnly bool
	// BeforeDiscard, when set, runs before an operator discards an intent
	// of this operation whose work may have reached the vendor (it had
	// started): it makes sure the vendor keeps nothing for it that nobody
	// holds (a create: the domain's site, when no license holds it, is
	// deleted). An error stops the discard, and the intent stays as it was.
	BeforeDiscard func(ctx context.Context, rec *Record) error
}

// Declared is an Operation of any input type, as the guard, the reconciler
// and the metrics see it. Only Operation implements it.
type Declared interface {
	// OperationName is the operation's Name.
	OperationName() string
	check() error
	resumer() Resumer
	retryOnly() bool
	beforeDiscard() func(ctx context.Context, rec *Record) error
}

// OperationName implements Declared.
func (op Operation[In]) OperationName() string { return op.Name }

func (op Operation[In]) check() error {
	switch {
	case op.Name == "":
		return errors.New("an operation has no name")
	case op.Run == nil:
		return fmt.Errorf("operation %q has no Run", op.Name)
	case op.Resume == nil:
		return fmt.Errorf("operation %q has no Resume: a pending intent of it could never be finished", op.Name)
	}
	return nil
}

func (op Operation[In]) resumer() Resumer { return resumeFunc(op.Resume) }

func (op Operation[In]) retryOnly() bool { return op.RetryOnly }

func (op Operation[In]) beforeDiscard() func(ctx context.Context, rec *Record) error {
	return op.BeforeDiscard
}

// resumeFunc adapts an Operation's Resume to the Resumer interface.
type resumeFunc func(ctx context.Context, call Call, rec *Record, mayCreate bool) (Resumption, error)

// Resume implements Resumer.
func (f resumeFunc) Resume(ctx context.Context, call Call, rec *Record, mayCreate bool) (Resumption, error) {
	return f(ctx, call, rec, mayCreate)
}

// Operations is the application's one list of guarded operations: the
// guard serves only these, the reconciler resumes them by name, and the
// metrics label by their names.
type Operations struct {
	names     []string
	resumers  map[string]Resumer
	retryOnly []string
	// beforeDiscard are the operations' BeforeDiscard, by name, for those
	// that have one.
	beforeDiscard map[string]func(ctx context.Context, rec *Record) error
}

// NewOperations checks and lists the application's operations. Every one
// needs a name no other has, a Run and a Resume; an error names the first
// that has not, so that a wiring mistake stops the process at start-up, not
// an intent an hour later.
func NewOperations(ops ...Declared) (*Operations, error) {
	o := &Operations{resumers: make(map[string]Resumer, len(ops)), beforeDiscard: map[string]func(context.Context, *Record) error{}}
	for _, op := range ops {
		if err := op.check(); err != nil {
			return nil, err
		}
		name := op.OperationName()
		if _, dup := o.resumers[name]; dup {
			return nil, fmt.Errorf("operation %q is declared twice", name)
		}
		o.names = append(o.names, name)
		o.resumers[name] = op.resumer()
		if op.retryOnly() {
			o.retryOnly = append(o.retryOnly, name)
		}
		if f := op.beforeDiscard(); f != nil {
			o.beforeDiscard[name] = f
		}
	}
	return o, nil
}

// Names are the operations' names, in declaration order.
func (o *Operations) Names() []string { return slices.Clone(o.names) }

// RetryOnly are the names of the operations whose intents an operator may
// retry but never discard (Operation.RetryOnly), as Store.Discard takes them.
func (o *Operations) RetryOnly() []string { return slices.Clone(o.retryOnly) }

// resumer is the Resumer of the operation named name.
func (o *Operations) resumer(name string) (Resumer, bool) {
	if o == nil {
		return nil, false
	}
	r, ok := o.resumers[name]
	return r, ok
}

// Operations are the operations g serves.
func (g *Guard) Operations() *Operations { return g.cfg.Operations }

// MustServe panics unless op is one of g's operations: a route mounted for
// an operation the application did not declare is a wiring mistake, found
// when the routes are built, not when an intent of it waits for a resumer.
func (g *Guard) MustServe(op Declared) {
	if _, ok := g.cfg.Operations.resumer(op.OperationName()); !ok {
		panic(fmt.Sprintf("idempotency: operation %q is not among the guard's operations", op.OperationName()))
	}
}

// Handler is op's route handler on g, for a caller that has its Call and
// nothing to note (tests, small servers); app/http uses Serve.
func (op Operation[In]) Handler(g *Guard, call func(echo.Context) Call) echo.HandlerFunc {
	g.MustServe(op)
	return func(c echo.Context) error {
		_, err := op.Serve(g, c, call(c), nil)
		return err
	}
}

// Serve runs one request for op through the guard: the key and the body
// are read, a retry with the same bytes is replayed at once, the body is
// bound once, the intent is reserved (or the existing record answered), Run
// runs as its owner and its response is written and settled. It returns
// what the guard decided, for the request's log line, and the error the
// error boundary answers with (nil: a response was written). pre, when not
// nil, is the request's record as its token row's statement read it
// (Prefetch); Serve uses it in place of its own first read when it was read
// for this request's scope.
func (op Operation[In]) Serve(g *Guard, c echo.Context, call Call, pre *Prefetch) (Note, error) {
	key, err := g.key(c, op.Key)
	if err != nil {
		return Note{}, err
	}
	body, err := readBody(c)
	if err != nil {
		return Note{}, err
	}
	req := c.Request()
	hash := bodyHash(req.Method, c.Path(), body)
	sc := Scope{ConsumerID: call.ConsumerID, Operation: op.Name, Key: key}
	var prior lookup
	if key != "" {
		fast, prefetched := pre.lookup(sc)
		if !prefetched {
			fast = g.lookup(req.Context(), sc) // the whole record
		}
		if fast.replayable(hash, g.now) {
			// The fast path of a retry: the same bytes as the first
			// execution, so the same intent; nothing to parse.
			return g.note(fast.rec, "replayed"), replay(c, fast.rec)
		}
		prior = fast
		if prefetched && fast.rec != nil { // a replay's columns of a record this request does not replay: the whole of it decides
			prior = g.lookup(req.Context(), sc)
		}
	}
	in, intent, err := op.bind(c, body)
	if err != nil {
		return Note{}, err
	}
	canonical := Canonical(body)
	if intent == nil {
		intent = canonical
	}
	rec := g.makeRecord(sc, Fingerprint(req.Method, c.Path(), intent), canonical, call.TokenID, call.RequestID)
	rec.BodyHash = &hash
	if op.Subject != nil {
		rec.Subject = nullable(op.Subject(in))
	}
	var resp Response
	a := &attempt{rec: rec, prior: prior, parent: req.Context(), requestID: call.RequestID,
		work: func(ctx context.Context) (r Response, o Outcome, err error) {
			r, o, err = op.Run(ctx, g.owned(call, rec), in)
			resp = r // what is written when the work succeeds
			return r, o, err
		}}
	var stored *Record
	if key == "" { // the server makes the key: the intent is on the record all the same
		err = g.unkeyed(a)
	} else {
		stored, err = g.run(a)
	}
	switch {
	case stored != nil:
		return a.noted, replay(c, stored)
	case err != nil:
		return a.noted, err
	}
	return a.noted, write(c, resp)
}

// owned is call as the owner of rec executes it: its steps write to rec,
// under the lease the reservation (or take-over) set.
func (g *Guard) owned(call Call, rec *Record) Call {
	call.owner = &owner{store: g.cfg.Store, rec: rec, status: StatusProcessing, lease: *rec.LockedUntil, now: g.now}
	return call
}

// bind is op.Bind, or the zero input when the operation has none.
func (op Operation[In]) bind(c echo.Context, body []byte) (In, []byte, error) {
	if op.Bind == nil {
		var zero In
		return zero, nil, nil
	}
	return op.Bind(c, body)
}

// Do runs op once for the intent its key names, for work that is not an
// HTTP request (a webhook, a queue job), through Guard.Do: in is Run's
// input and intent what fingerprints it and is stored for Resume. It
// returns the response Run gave, or the stored one with replayed true.
func (op Operation[In]) Do(ctx context.Context, g *Guard, call Call, key string, in In, intent []byte) (resp Response, replayed bool, err error) {
	g.MustServe(op)
	sc := Scope{ConsumerID: call.ConsumerID, Operation: op.Name, Key: key}
	res, replayed, err := g.do(ctx, sc, intent, func(ctx context.Context, rec *Record) (DoResult, error) {
		r, o, err := op.Run(ctx, g.owned(call, rec), in)
		if err != nil {
			return DoResult{Outcome: o}, err
		}
		return DoResult{Status: r.Status, Body: r.Body, Outcome: o}, nil
	})
	return Response{Status: res.Status, Body: res.Body}, replayed, err
}

// write answers with the response Run gave.
func write(c echo.Context, r Response) error {
	h := c.Response().Header()
	for name, v := range r.Headers {
		h.Set(name, v)
	}
	status := r.Status
	if status == 0 {
		status = http.StatusOK
	}
	c.Response().WriteHeader(status)
	if len(r.Body) == 0 {
		return nil
	}
	_, err := c.Response().Write(r.Body)
	return err
}
