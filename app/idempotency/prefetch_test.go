package idempotency

import (
	"context"
	"net/http"
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
			Run: func(context.Context, *Execution, struct{}) (Response, error) {
				return Response{Status: http.StatusCreated, Body: []byte(`{"made":true}`),
					Headers: map[string]string{echo.HeaderContentType: echo.MIMEApplicationJSON}, ExternalRef: "site_1"}, nil
			},
			Resume: func(context.Context, *Execution, *Record, bool) (Response, bool, error) {
				return Response{}, false, nil
			},
		}
		live := newTestGuard(t, Config{Store: NewStore(db.Gorm, testCipher(t), nil, nil), TTL: time.Hour}, op)
		gone := testdb.New(t, db.Dialect)
		goneDB, _ := gone.Gorm.DB()
		goneDB.Close()
		// The guard under test writes to the database and reads through a pool that is gone.
		blind := newTestGuard(t, Config{Store: NewStore(db.Gorm, testCipher(t), gone.Gorm, nil), TTL: time.Hour}, op)

		type answer struct {
			Code   int
			header map[string]string
			Body   string
		}
		serve := func(g *Guard, consumer string, pre func() *Prefetch) (answer, map[string]string, error) {
			resp, attrs, err := op.Serve(context.Background(), g, Request{Caller: Caller{ConsumerID: consumer}, Method: http.MethodPost,
				Route: "/things", Key: "k1", Body: []byte(`{"a":1}`), Prefetch: pre()},
				func([]byte) (struct{}, []byte, error) { return struct{}{}, nil, nil })
			note := map[string]string{}
			for _, a := range attrs {
				note[a.Key] = a.Value.String()
			}
			return answer{resp.Status, resp.Headers, string(resp.Body)}, note, err
		}
		read := func(consumer string) func() *Prefetch {
			return func() *Prefetch {
				p := blind.Prefetch(op.Name, "k1")
				readPrefetch(t, db, p, consumer)
				return p
			}
		}
		none := func() *Prefetch { return nil }

		// No record yet: the Prefetch says so, and the first execution runs without a read of its own.
		if rec, note, err := serve(blind, "c1", read("c1")); err != nil || rec.Code != http.StatusCreated || note["outcome"] != "executed" {
			t.Fatalf("first: %d %+v %v", rec.Code, note, err)
		}
		rec, note, err := serve(blind, "c1", read("c1"))
		if err != nil || rec.Code != http.StatusCreated || rec.header[headerReplayed] != "true" || rec.Body != `{"made":true}` ||
			note["outcome"] != "replayed" || note["vendor_ref"] != "site_1" {
			t.Fatalf("replay from the Prefetch: %d %v %q %+v %v", rec.Code, rec.header, rec.Body, note, err)
		}
		// Without one, or with one read for another consumer, or never read, the guard reads: here it cannot.
		if _, _, err := serve(blind, "c1", none); err == nil {
			t.Error("no Prefetch, and no read made")
		}
		if _, _, err := serve(blind, "c1", read("c2")); err == nil {
			t.Error("a Prefetch read for another consumer was used")
		}
		if _, _, err := serve(blind, "c1", func() *Prefetch { return blind.Prefetch(op.Name, "k1") }); err == nil {
			t.Error("a Prefetch never read was used")
		}
		// The live guard agrees: c1's record replays, and c2 has none of its own.
		if rec, _, err := serve(live, "c1", none); err != nil || rec.header[headerReplayed] != "true" {
			t.Errorf("live replay: %d %v", rec.Code, err)
		}
		if rec, note, err := serve(live, "c2", read("c2")); err != nil || rec.header[headerReplayed] == "true" || note["outcome"] != "executed" {
			t.Errorf("c2 under c1's key: %d %+v %v", rec.Code, note, err)
		}
	})
}

// A request without a valid key has no Prefetch: Serve answers for its key.
func TestNoPrefetchWithoutAValidKey(t *testing.T) {
	g := &Guard{cfg: Config{Store: &Store{}}}
	for _, key := range []string{"", "with space", strings.Repeat("k", 256)} {
		if p := g.Prefetch("things.store", key); p != nil {
			t.Errorf("key %q: a Prefetch", key)
		}
	}
	if p := g.Prefetch("things.store", "k1"); p == nil || p.key != "k1" || p.operation != "things.store" {
		t.Errorf("Prefetch = %+v", p)
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
