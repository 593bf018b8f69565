package idempotency

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/crypt"
	"github.com/licensor-api/licensor/internal/dbtime"
	"github.com/licensor-api/licensor/tests/testdb"
)

// testCipher is the Cipher of the tests: a fixed key.
func testCipher(t testing.TB) *crypt.Cipher { return cipherOf(t, 7) }

func cipherOf(t testing.TB, b byte, previous ...[]byte) *crypt.Cipher {
	t.Helper()
	c, err := crypt.New(bytes.Repeat([]byte{b}, crypt.KeySize), previous...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// storedBody is the response_body column of the key's record, as stored.
func storedBody(t *testing.T, db *testdb.DB, key string) []byte {
	t.Helper()
	var rec Record
	if err := db.Gorm.Where("idempotency_key = ?", key).Take(&rec).Error; err != nil {
		t.Fatal(err)
	}
	return rec.ResponseBody
}

// The stored response is sealed, and its replay is the first response byte
// for byte.
func TestResponseBodyEncryptedAndReplayedByteForByte(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		h := newHarness(t, db)
		body := `{"data":{"license_key":"LK-secret/+="}}` + "\n"
		h.run = respond(http.StatusCreated, "application/json", body)
		first := h.post("k", `{"a":1}`)
		if first.Code != http.StatusCreated || first.Body.String() != body {
			t.Fatalf("first = %d %q", first.Code, first.Body.String())
		}
		raw := storedBody(t, db, "k")
		if bytes.Contains(raw, []byte("LK-secret")) || !crypt.Encrypted(string(raw)) {
			t.Errorf("stored body = %q, want an envelope", raw)
		}
		replay := h.post("k", `{"a":1}`)
		if replay.Header().Get(headerReplayed) != "true" || !bytes.Equal(replay.Body.Bytes(), first.Body.Bytes()) {
			t.Errorf("replay = %q (replayed %q), want the first body byte for byte", replay.Body.String(), replay.Header().Get(headerReplayed))
		}
	})
}

// A response stored in plaintext before encryption at rest still replays.
func TestLegacyPlaintextBodyReplays(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		h := newHarness(t, db)
		h.run = text(http.StatusCreated, "made")
		h.post("k", `{"a":1}`)
		if err := db.Gorm.Model(&Record{}).Where("idempotency_key = ?", "k").Update("response_body", []byte("legacy body")).Error; err != nil {
			t.Fatal(err)
		}
		if got := h.post("k", `{"a":1}`); got.Body.String() != "legacy body" || h.runs.Load() != 1 {
			t.Errorf("replay = %q after %d runs, want the legacy body and one run", got.Body.String(), h.runs.Load())
		}
	})
}

// The reconciler's completion is sealed too.
func TestCompleteClaimedEncrypts(t *testing.T) {
	db := testdb.New(t, "sqlite")
	s := NewStore(db.Gorm, testCipher(t), nil, nil)
	ctx := context.Background()
	now := dbtime.Now()
	r := &Record{ConsumerID: "c1", Operation: "op", Key: "k", RequestHash: "h", Status: StatusPending,
		Attempts: 1, CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Hour)}
	if _, ok, err := s.reserve(ctx, r); !ok || err != nil {
		t.Fatalf("Reserve = %v, %v", ok, err)
	}
	lease := now.Add(time.Minute)
	if won, err := s.claim(ctx, r, lease, now); !won || err != nil {
		t.Fatalf("Claim = %v, %v", won, err)
	}
	r.Status, r.LockedUntil = StatusPending, &lease
	if err := s.completeClaimed(ctx, r, lease, Response{Status: 201, Body: []byte("LK-reconciled")}, now, now.Add(time.Hour), nil); err != nil {
		t.Fatal(err)
	}
	if raw := storedBody(t, db, "k"); bytes.Contains(raw, []byte("LK-reconciled")) {
		t.Errorf("stored body = %q, want it sealed", raw)
	}
	if got, err := s.find(ctx, r.scope()); err != nil || string(got.ResponseBody) != "LK-reconciled" {
		t.Errorf("Find = %v, %v", got, err)
	}
}

// Under a key that cannot open it, a stored body is an error that shows
// neither the body nor its envelope, and nothing replays.
func TestUndecryptableBodyIsAnError(t *testing.T) {
	db := testdb.New(t, "sqlite")
	h := newHarness(t, db)
	h.run = text(http.StatusCreated, "LK-secret")
	h.post("k", `{"a":1}`)
	_, err := NewStore(db.Gorm, cipherOf(t, 9), nil, nil).find(context.Background(), scope{ConsumerID: "c1", Operation: "things.store", Key: "k"})
	if !errors.Is(err, crypt.ErrDecrypt) {
		t.Fatalf("Find under another key = %v, want ErrDecrypt", err)
	}
	if strings.Contains(err.Error(), "LK-secret") || strings.Contains(err.Error(), string(storedBody(t, db, "k"))) {
		t.Errorf("the error leaks the body: %v", err)
	}
}

// The key digest is keyed: not the plain SHA-256 prefix, stable for one
// APP_KEY, different under another; the intents show the same digest.
func TestKeyDigestIsKeyed(t *testing.T) {
	db := testdb.New(t, "sqlite")
	key := "very-secret-idempotency-key-42"
	s := NewStore(db.Gorm, cipherOf(t, 1), nil, nil)
	d := s.KeyDigest(key)
	sum := sha256.Sum256([]byte(key))
	if d == hex.EncodeToString(sum[:6]) || len(d) != 12 {
		t.Errorf("KeyDigest = %q, want 12 hex characters of a keyed digest", d)
	}
	if NewStore(db.Gorm, cipherOf(t, 1, bytes.Repeat([]byte{2}, 32)), nil, nil).KeyDigest(key) != d {
		t.Error("KeyDigest differs for one APP_KEY")
	}
	if NewStore(db.Gorm, cipherOf(t, 2, bytes.Repeat([]byte{1}, 32)), nil, nil).KeyDigest(key) == d {
		t.Error("KeyDigest is the same under another APP_KEY")
	}
	now := dbtime.Now()
	if _, ok, err := s.reserve(context.Background(), &Record{ConsumerID: "c1", Operation: "op", Key: key, RequestHash: "h",
		Status: StatusPending, Attempts: 1, CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Hour)}); !ok {
		t.Fatalf("Reserve: %v", err)
	}
	intents, _, err := s.Intents(context.Background(), IntentFilter{})
	if err != nil || len(intents) != 1 || intents[0].KeyDigest != d {
		t.Errorf("Intents = %+v, %v; want the key digest %s", intents, err, d)
	}
}

func TestNewStoreRefusesNoCipher(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("NewStore without a Cipher did not panic")
		}
	}()
	NewStore(nil, nil, nil, nil)
}
