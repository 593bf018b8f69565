package web

import (
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/internal/testkit"
)

func TestSessionRoundTripAndRefusals(t *testing.T) {
	clk := testkit.NewClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	s := sessions{key: deriveKey([]byte("0123456789abcdef0123456789abcdef"), "test"), now: clk.Now}
	se := s.open("tok", "con", clk.Now().Add(time.Hour), 8*time.Hour)
	if got := time.Unix(se.Expires, 0).Sub(clk.Now()); got != time.Hour {
		t.Fatalf("a session outlives its token: ends in %v, want 1h", got)
	}
	value := s.encode(se)
	got, err := s.decode(value)
	if err != nil || got != se {
		t.Fatalf("decode = %+v, %v; want %+v", got, err, se)
	}
	other := sessions{key: deriveKey([]byte("another key, 32 bytes long......"), "test"), now: clk.Now}
	payload, sig, _ := strings.Cut(value, ".")
	for name, v := range map[string]string{
		"empty": "", "no signature": payload, "bad base64": payload + ".!!", "other key": other.encode(se),
		"payload swapped": other.encode(other.open("admin", "con", time.Time{}, time.Hour))[:len(payload)] + "." + sig,
	} {
		if _, err := s.decode(v); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	clk.Advance(time.Hour)
	if _, err := s.decode(value); err == nil {
		t.Error("decoded past its end")
	}
	if !s.validCSRF(se.Nonce, s.csrf(se.Nonce)) || s.validCSRF(se.Nonce, s.csrf("another")) || s.validCSRF("", s.csrf("")) {
		t.Error("csrf tokens are not bound to their session")
	}
}

func TestLoginLimiterWindowAndBound(t *testing.T) {
	clk := testkit.NewClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	l := newLoginLimiter(2, clk.Now)
	for i, want := range []bool{true, true, false} {
		if ok, _ := l.take("a"); ok != want {
			t.Fatalf("attempt %d: %v, want %v", i+1, ok, want)
		}
	}
	if ok, _ := l.take("b"); !ok {
		t.Fatal("another address shares a's window")
	}
	clk.Advance(time.Minute)
	if ok, _ := l.take("a"); !ok {
		t.Fatal("a new minute did not open a new window")
	}
	for i := range maxAddresses {
		l.take(string(rune(i + 1000)))
	}
	if len(l.windows) > maxAddresses {
		t.Fatalf("%d windows kept, at most %d", len(l.windows), maxAddresses)
	}
}
