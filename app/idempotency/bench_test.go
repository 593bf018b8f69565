package idempotency

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/licensor-api/licensor/tests/testdb"
)

// BenchmarkGuard measures the layer's three paths on SQLite, with a
// handler that does nothing else: compare runs with benchstat.
//
//	go test -run '^$' -bench Guard -count 10 ./app/idempotency | tee new.txt
func BenchmarkGuard(b *testing.B) {
	body := `{"name":"Acme","domain":"acme.test"}`
	b.Run("new", func(b *testing.B) {
		h := newHarness(b, testdb.New(b, "sqlite"))
		h.run = respond(http.StatusCreated, "application/json", body)
		for i := 0; b.Loop(); i++ {
			if rec := h.post("k-"+strconv.Itoa(i), body); rec.Code != http.StatusCreated {
				b.Fatalf("status %d", rec.Code)
			}
		}
	})
	b.Run("keyless", func(b *testing.B) { // a request without a key: its auto: record, written and settled
		h := newHarness(b, testdb.New(b, "sqlite"))
		h.run = respond(http.StatusCreated, "application/json", body)
		for i := 0; b.Loop(); i++ {
			req := httptest.NewRequest(http.MethodPost, "/things", strings.NewReader(body))
			req.Header.Set("X-Consumer", "c1")
			req.Header.Set("X-Request-Id", "r-"+strconv.Itoa(i))
			rec := httptest.NewRecorder()
			h.e.ServeHTTP(rec, req)
			if rec.Code != http.StatusCreated {
				b.Fatalf("status %d", rec.Code)
			}
		}
	})
	replay := func(c Cipher) func(b *testing.B) {
		return func(b *testing.B) {
			h := newHarnessWith(b, testdb.New(b, "sqlite"), c)
			h.run = respond(http.StatusCreated, "application/json", body)
			h.post("k", body)
			for b.Loop() {
				if rec := h.post("k", body); rec.Header().Get(headerReplayed) != "true" {
					b.Fatalf("not replayed: %d", rec.Code)
				}
			}
		}
	}
	b.Run("replay", replay(testCipher(b)))               // the stored body decrypted (AES-256-GCM), as in production
	b.Run("replay-plaintext", replay(plaintextCipher{})) // the same, stored as it is: what encryption costs
	b.Run("conflict", func(b *testing.B) {
		h := newHarness(b, testdb.New(b, "sqlite"))
		release := make(chan struct{})
		entered := make(chan struct{})
		h.run = func(context.Context) (Response, error) {
			close(entered)
			<-release
			return Response{Status: http.StatusCreated}, nil
		}
		go h.post("k", body) // holds the lease for the whole benchmark
		<-entered
		for b.Loop() {
			if rec := h.post("k", body); rec.Code == http.StatusCreated {
				b.Fatal("a conflicting request executed")
			}
		}
		close(release)
	})
}

// plaintextCipher stores bodies as they are, to measure the layer without
// encryption; the digest is the key itself, which only a test may do.
type plaintextCipher struct{}

func (plaintextCipher) Encrypt(p []byte) (string, error) { return string(p), nil }
func (plaintextCipher) Decrypt(s string) ([]byte, error) { return []byte(s), nil }
func (plaintextCipher) Encrypted(string) bool            { return false }
func (plaintextCipher) Digest(s string) string           { return s }
