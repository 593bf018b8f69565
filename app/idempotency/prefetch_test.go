package idempotency

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/tests/testdb"
)

// A Prefetch read with the request's token row answers the replay in place
// of the guard's own read: with the store's read pool gone, a replay still
// replays from it. One read for another consumer, or one never made, is not
// used: the guard reads the record itself. A Prefetch that found no record
// lets the first execution run.
func TestServeReplaysFromThePrefetchWithoutAReadOfItsOwn(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		op := Operation[struct{}]{
			Name: "things.store",
			Run: func(context.Context, Call, struct{}) (Response, Outcome, error) {
				return Response{Status: http.StatusCreated, Body: []byte(`{"made":true}`),
					Headers: map[string]string{echo.HeaderContentType: echo.MIMEApplicationJSON}}, Outcome{ExternalRef: "site_1"}, nil
			},
			Resume: func(context.Context, Call, *Record, bool) (Resumption, error) { return Resumption{}, nil },
		}
		live := newTestGuard(t, Config{Store: NewStore(db.Gorm, testCipher(t)), TTL: time.Hour}, op)
		gone := testdb.New(t, db.Dialect)
		goneDB, _ := gone.Gorm.DB()
		goneDB.Close()
		// The guard under test writes to the database and reads through a pool that is gone.
		blind := newTestGuard(t, Config{Store: NewStore(db.Gorm, testCipher(t), WithReadPool(gone.Gorm)), TTL: time.Hour}, op)

		serve := func(g *Guard, consumer string, pre func(c echo.Context) *Prefetch) (*httptest.ResponseRecorder, Note, error) {
			req := httptest.NewRequest(http.MethodPost, "/things", strings.NewReader(`{"a":1}`))
			req.Header.Set(HeaderKey, "k1")
			rec := httptest.NewRecorder()
			c := echo.New().NewContext(req, rec)
			c.SetPath("/things")
			note, err := op.Serve(g, c, Call{ConsumerID: consumer}, pre(c))
			return rec, note, err
		}
		read := func(consumer string) func(c echo.Context) *Prefetch {
			return func(c echo.Context) *Prefetch {
				p := op.Prefetch(blind, c)
				readPrefetch(t, db, p, consumer)
				return p
			}
		}
		none := func(echo.Context) *Prefetch { return nil }

		// No record yet: the Prefetch says so, and the first execution runs without a read of its own.
		if rec, note, err := serve(blind, "c1", read("c1")); err != nil || rec.Code != http.StatusCreated || note.Outcome != "executed" {
			t.Fatalf("first: %d %+v %v", rec.Code, note, err)
		}
		rec, note, err := serve(blind, "c1", read("c1"))
		if err != nil || rec.Code != http.StatusCreated || rec.Header().Get(HeaderReplayed) != "true" || rec.Body.String() != `{"made":true}` ||
			note.Outcome != "replayed" || note.VendorRef != "site_1" {
			t.Fatalf("replay from the Prefetch: %d %v %q %+v %v", rec.Code, rec.Header(), rec.Body, note, err)
		}
		// Without one, or with one read for another consumer, or never read, the guard reads: here it cannot.
		if _, _, err := serve(blind, "c1", none); err == nil {
			t.Error("no Prefetch, and no read made")
		}
		if _, _, err := serve(blind, "c1", read("c2")); err == nil {
			t.Error("a Prefetch read for another consumer was used")
		}
		if _, _, err := serve(blind, "c1", func(c echo.Context) *Prefetch { return op.Prefetch(blind, c) }); err == nil {
			t.Error("a Prefetch never read was used")
		}
		// The live guard agrees: c1's record replays, and c2 has none of its own.
		if rec, _, err := serve(live, "c1", none); err != nil || rec.Header().Get(HeaderReplayed) != "true" {
			t.Errorf("live replay: %d %v", rec.Code, err)
		}
		if rec, note, err := serve(live, "c2", read("c2")); err != nil || rec.Header().Get(HeaderReplayed) == "true" || note.Outcome != "executed" {
			t.Errorf("c2 under c1's key: %d %+v %v", rec.Code, note, err)
		}
	})
}

// A request without a valid key has no Prefetch: Serve answers for its key.
func TestNoPrefetchWithoutAValidKey(t *testing.T) {
	op := Operation[struct{}]{Name: "things.store"}
	g := &Guard{cfg: Config{Store: &Store{}}}
	for _, key := range []string{"", "with space", strings.Repeat("k", 256)} {
		req := httptest.NewRequest(http.MethodPost, "/things", nil)
		if key != "" {
			req.Header.Set(HeaderKey, key)
		}
		if p := op.Prefetch(g, echo.New().NewContext(req, httptest.NewRecorder())); p != nil {
			t.Errorf("key %q: a Prefetch", key)
		}
	}
	req := httptest.NewRequest(http.MethodPost, "/things", nil)
	req.Header.Set(HeaderKey, "k1")
	if p := op.Prefetch(g, echo.New().NewContext(req, httptest.NewRecorder())); p == nil || p.key != "k1" || p.operation != "things.store" {
		t.Errorf("key k1: %+v", p)
	}
}

// readPrefetch runs p's part of the token row's statement for a token of
// consumer, as auth's VerifyWith does (on a row standing for the token's).
func readPrefetch(t *testing.T, db *testdb.DB, p *Prefetch, consumer string) {
	t.Helper()
	columns, join := p.Join()
	args := append([]any{consumer}, p.Args()...)
	if err := db.Gorm.Raw("SELECT "+columns+" FROM (SELECT ? AS consumer_id) t "+join, args...).Row().Scan(p.Dest()...); err != nil {
		t.Fatal(err)
	}
}
