package idempotency

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/internal/ptr"
	"github.com/licensor-api/licensor/tests/testdb"
)

// A retry with the very bytes of the first execution replays without its
// body parsed (Bind is not called); other bytes of the same intent (keys
// reordered) are parsed and replay too; another intent is refused; a record
// older than body_hash replays through the parse as before.
func TestReplayOfTheSameBytesSkipsTheParse(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		var binds atomic.Int32
		store := NewStore(db.Gorm, testCipher(t), nil, nil)
		op := Operation[struct{}]{
			Name: "things.store",
			Run: func(context.Context, *Execution, struct{}) (Response, error) {
				return Response{Status: http.StatusCreated, Body: []byte(`{"made":true}`),
					Headers: map[string]string{echo.HeaderLocation: "/things/1", echo.HeaderContentType: echo.MIMEApplicationJSON}}, nil
			},
			Resume: func(context.Context, *Execution, *Record, bool) (Response, bool, error) {
				return Response{}, false, nil
			},
		}
		g := newTestGuard(t, Config{Store: store, TTL: time.Hour, LockTimeout: time.Minute}, op)
		e := echo.New()
		e.POST("/things", op.Handler(g, headerCall, func(body []byte) (struct{}, []byte, error) {
			binds.Add(1)
			return struct{}{}, canonicalJSON(body), nil
		}))
		post := func(body string) *httptest.ResponseRecorder {
			req := httptest.NewRequest(http.MethodPost, "/things", strings.NewReader(body))
			req.Header.Set(HeaderKey, "k1")
			rec := httptest.NewRecorder()
			e.ServeHTTP(rec, req)
			return rec
		}
		first := post(`{"a":1,"b":2}`)
		if first.Code != http.StatusCreated || binds.Load() != 1 {
			t.Fatalf("first: %d, %d binds", first.Code, binds.Load())
		}
		same := post(`{"a":1,"b":2}`)
		if same.Code != http.StatusCreated || same.Header().Get(headerReplayed) != "true" || same.Body.String() != `{"made":true}` ||
			same.Header().Get(echo.HeaderLocation) != "/things/1" {
			t.Fatalf("same bytes: %d %v %s", same.Code, same.Header(), same.Body)
		}
		if n := binds.Load(); n != 1 {
			t.Errorf("the same bytes were parsed again (%d binds)", n)
		}
		if r := post(`{"b":2,"a":1}`); r.Code != http.StatusCreated || r.Header().Get(headerReplayed) != "true" || binds.Load() != 2 {
			t.Errorf("reordered: %d replayed=%q, %d binds; want a parsed replay", r.Code, r.Header().Get(headerReplayed), binds.Load())
		}
		if r := post(`{"a":1,"b":3}`); r.Code == http.StatusCreated {
			t.Errorf("another intent under the key was answered %d", r.Code)
		}
		// A record from before body_hash: no hash, headers as a JSON object.
		if err := db.Gorm.Model(&Record{}).Where("idempotency_key = ?", "k1").
			Updates(map[string]any{"body_hash": nil, "response_headers": `{"Content-Type":"application/json","Location":"/things/1"}`}).Error; err != nil {
			t.Fatal(err)
		}
		before := binds.Load()
		old := post(`{"a":1,"b":2}`)
		if old.Code != http.StatusCreated || old.Header().Get(echo.HeaderLocation) != "/things/1" || binds.Load() != before+1 {
			t.Errorf("old record: %d Location %q, %d binds; want a parsed replay with its headers", old.Code, old.Header().Get(echo.HeaderLocation), binds.Load()-before)
		}
		rec, err := store.find(context.Background(), scope{"c1", "things.store", "k1"})
		if err != nil || rec == nil {
			t.Fatal(rec, err)
		}
		if got := storedHeader(rec.ResponseHeaders, "location"); got != "/things/1" {
			t.Errorf("storedHeader(location) = %q", got)
		}
	})
}

func TestHeadersRoundTrip(t *testing.T) {
	h := map[string]string{"Location": "/api/licenses/01J", "Content-Type": "application/json"}
	got := map[string]string{}
	if err := eachHeader(encodeHeaders(h), func(n, v string) { got[n] = v }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["Location"] != h["Location"] || got["Content-Type"] != h["Content-Type"] {
		t.Errorf("round trip = %v, want %v", got, h)
	}
	if bodyHash("POST", "/a", []byte("b")) == bodyHash("POST", "/ab", nil) {
		t.Error("bodyHash lets the route and body run together")
	}
}

// A Prefetch reads of a record what a replay needs, the same as Find reads
// of it; that there is none when there is none; and its body fails to open
// as Find's would under a key that did not seal it.
func TestPrefetchReadsWhatAReplayNeeds(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		ctx := context.Background()
		store := NewStore(db.Gorm, testCipher(t), nil, nil)
		sc := scope{ConsumerID: "c1", Operation: "things.store", Key: "k1"}
		prefetch := func(store *Store) lookup {
			t.Helper()
			p := &Prefetch{store: store, operation: sc.Operation, key: sc.Key}
			readPrefetch(t, db, p, sc.ConsumerID)
			l, ok := p.lookup(sc)
			if !ok {
				t.Fatal("a Prefetch read for the scope was not taken for it")
			}
			return l
		}
		if l := prefetch(store); l.rec != nil || l.err != nil || !l.done {
			t.Fatalf("no record: %+v", l)
		}
		now := time.Now().UTC().Truncate(time.Second)
		hash, ref, lease := "h1", "site_1", now.Add(time.Minute)
		rec := &Record{ConsumerID: sc.ConsumerID, Operation: sc.Operation, Key: sc.Key, RequestHash: "r", BodyHash: &hash,
			Status: statusProcessing, LockedUntil: &lease, CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Hour)}
		if _, ok, err := store.reserve(ctx, rec); err != nil || !ok {
			t.Fatal(ok, err)
		}
		resp := Response{Status: http.StatusCreated, Body: []byte(`{"made":true}`), Headers: map[string]string{echo.HeaderLocation: "/things/1"}, ExternalRef: ref}
		if err := store.complete(ctx, rec, resp, now); err != nil {
			t.Fatal(err)
		}
		full, err := store.find(ctx, sc)
		if err != nil || full == nil {
			t.Fatal(full, err)
		}
		l := prefetch(store)
		fast := l.rec
		if l.err != nil || fast == nil {
			t.Fatal(l)
		}
		if fast.ID != full.ID || fast.Status != StatusCompleted || *fast.BodyHash != hash || *fast.ResponseStatus != http.StatusCreated ||
			*fast.ResponseHeaders != *full.ResponseHeaders || string(fast.ResponseBody) != `{"made":true}` ||
			ptr.Deref(fast.ExternalRef) != ref || !fast.ExpiresAt.Equal(full.ExpiresAt) ||
			fast.ConsumerID != sc.ConsumerID || fast.Operation != sc.Operation || fast.Key != sc.Key {
			t.Errorf("the Prefetch read %+v, want what Find reads of it: %+v", fast, full)
		}
		// A body no configured key opens fails the read.
		if l := prefetch(NewStore(db.Gorm, cipherOf(t, 9), nil, nil)); l.err == nil {
			t.Error("a body sealed under another key was read")
		}
	})
}
