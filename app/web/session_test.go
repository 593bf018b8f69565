package web

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/internal/testkit"
)

func TestSessionRoundTripAndRefusals(t *testing.T) {
	clk := testkit.NewClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	s := sessions{key: mac([]byte("0123456789abcdef0123456789abcdef"), "test"), now: clk.Now}
	se := s.open("tok", "con", clk.Now().Add(time.Hour), 8*time.Hour)
	if got := time.Unix(se.Expires, 0).Sub(clk.Now()); got != time.Hour {
		t.Fatalf("a session outlives its token: ends in %v, want 1h", got)
	}
	if _, err := s.decode(s.encode(se)); err == nil {
		t.Fatal("a session without its row decoded")
	}
	se.ID = "01JSESSION0000000000000000"
	value := s.encode(se)
	got, err := s.decode(value)
	if err != nil || got != se {
		t.Fatalf("decode = %+v, %v; want %+v", got, err, se)
	}
	other := sessions{key: mac([]byte("another key, 32 bytes long......"), "test"), now: clk.Now}
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
	if !s.validCSRF(sessionCSRF, se.Nonce, s.csrf(sessionCSRF, se.Nonce)) || s.validCSRF(sessionCSRF, se.Nonce, s.csrf(sessionCSRF, "another")) ||
		s.validCSRF(sessionCSRF, "", s.csrf(sessionCSRF, "")) {
		t.Error("csrf tokens are not bound to their session")
	}
	// The sign-in page derives a token from any secret a client brings: never a session's.
	if s.validCSRF(sessionCSRF, se.Nonce, s.csrf(loginCSRF, se.Nonce)) {
		t.Error("a sign-in form's token is a session's")
	}
}

func TestLoginLimiterWindowAndBound(t *testing.T) {
	clk := testkit.NewClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	l := newLoginLimiter(2, clk.Now)
	for i, want := range []struct{ ok, first bool }{{true, false}, {true, false}, {false, true}, {false, false}} {
		r := l.take("a", "")
		if (r == nil) != want.ok || (r != nil && r.first != want.first) {
			t.Fatalf("attempt %d: refusal %+v, want %+v", i+1, r, want)
		}
	}
	if r := l.take("b", ""); r != nil {
		t.Fatal("another address shares a's window")
	}
	clk.Advance(time.Minute)
	if r := l.take("a", ""); r != nil {
		t.Fatal("a new minute did not open a new window")
	}
	for i := range maxWindows {
		l.take(string(rune(i+1000)), string(rune(i+1000)))
	}
	if len(l.byAddr) > maxWindows || len(l.byToken) > maxWindows {
		t.Fatalf("%d, %d windows kept, at most %d", len(l.byAddr), len(l.byToken), maxWindows)
	}
}

// Failed attempts count per address and per token: many addresses against
// one token are stopped as one address is, a success counts for nothing,
// and a refused attempt is counted in neither window.
func TestLoginLimiterCountsPerTokenToo(t *testing.T) {
	clk := testkit.NewClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	l := newLoginLimiter(3, clk.Now)
	for i := range 3 {
		if r := l.take(fmt.Sprintf("192.0.2.%d", i), "T1"); r != nil {
			t.Fatalf("attempt %d refused: %+v", i+1, r)
		}
	}
	if r := l.take("192.0.2.99", "T1"); r == nil || r.by != "token" || !r.first {
		t.Fatalf("a fourth address on T1: %+v, want refused by token", r)
	}
	if r := l.take("192.0.2.0", "T2"); r != nil {
		t.Fatalf("another token from an address that tried T1: %+v", r)
	}
	if r := l.take("192.0.2.99", "T2"); r != nil {
		t.Fatalf("the refused attempt was counted against its address: %+v", r)
	}
	l.forgive("192.0.2.99", "T2") // it signed in
	if got := l.byToken["T2"].count; got != 1 {
		t.Fatalf("T2 counts %d after a failure and a success, want 1", got)
	}
}
