package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
)

// memStore is an answerStore in memory.
type memStore struct {
	mu   sync.Mutex
	vals map[string][]byte
	gets int
}

func (m *memStore) Get(key string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gets++
	return m.vals[key], nil
}

func (m *memStore) Set(key string, val []byte, _ time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.vals[key] = val
	return nil
}

func TestEchoPeerAnswerRoundTrip(t *testing.T) {
	h := http.Header{}
	h.Set(echo.HeaderContentType, "application/json")
	h.Set(echo.HeaderLocation, "/api/licenses/1")
	h.Set("X-Other", "not kept")
	status, headers, body, err := decodeAnswer(encodeAnswer(http.StatusCreated, h, []byte(`{"data":{}}`)))
	if err != nil || status != http.StatusCreated || string(body) != `{"data":{}}` ||
		strings.Join(headers, ";") != "Content-Type;application/json;Location;/api/licenses/1" {
		t.Fatalf("decoded %d %q %q %v", status, headers, body, err)
	}
	if _, _, _, err := decodeAnswer([]byte{0xff}); err == nil {
		t.Fatal("a truncated answer decoded")
	}
}

// The same-stack peer's middleware runs the handler once per key and
// replays its answer, headers and body, with one read of the store.
func TestEchoPeerReplaysTheStoredAnswer(t *testing.T) {
	store := &memStore{vals: map[string][]byte{}}
	e := echo.New()
	e.POST("/api/licenses", echoPeerStore(300), echoIdempotency(store, time.Hour))
	post := func(key string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/api/licenses", strings.NewReader(`{"Name":"Acme","Domain":"acme.test"}`))
		req.Header.Set("Idempotency-Key", key)
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		return rec
	}
	key := "00000000-0000-0000-0000-000000000001"
	first := post(key)
	if first.Code != http.StatusCreated || len(first.Body.String()) < 300 {
		t.Fatalf("first = %d %s", first.Code, first.Body)
	}
	gets := store.gets
	again := post(key)
	if again.Code != first.Code || again.Body.String() != first.Body.String() ||
		again.Header().Get(echo.HeaderLocation) != first.Header().Get(echo.HeaderLocation) {
		t.Fatalf("replay = %d %s, want the first answer", again.Code, again.Body)
	}
	if store.gets-gets != 1 {
		t.Errorf("a replay read the store %d times, want once", store.gets-gets)
	}
	if other := post("00000000-0000-0000-0000-000000000002"); other.Body.String() == first.Body.String() {
		t.Error("another key was replayed the first key's answer")
	}
	if bad := post("short"); bad.Code != http.StatusBadRequest {
		t.Errorf("a key that is no UUID = %d, want 400", bad.Code)
	}
}
