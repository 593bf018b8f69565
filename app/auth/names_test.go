package auth

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/internal/fault"
	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

func TestNormalizeConsumerName(t *testing.T) {
	for in, want := range map[string]string{
		"  acme ":              "acme",
		"Mu\u0308ller":         "M\u00fcller",
		"\tM\u00fcller\n":      "M\u00fcller",
		"A\u030angstro\u0308m": "\u00c5ngstr\u00f6m",
		"\xffbad":              "\xffbad", // left for validation to refuse
	} {
		if got := NormalizeConsumerName(in); got != want {
			t.Errorf("NormalizeConsumerName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestConsumerNameProblem(t *testing.T) {
	for _, ok := range []string{"acme", "M\u00fcller GmbH", "株式会社", "a b", strings.Repeat("é", 191)} {
		if msg := consumerNameProblem(ok); msg != "" {
			t.Errorf("%q refused: %s", ok, msg)
		}
	}
	for bad, want := range map[string]string{
		"":                       "required",
		"\xffacme":               "valid UTF-8",
		"acme\x00":               "control",
		"acme\u202egpj":          "control",
		"ac\u200bme":             "control",
		"ac\u200dme":             "control",
		"\ufeffacme":             "control",
		"ac\u00adme":             "control", // soft hyphen, Cf
		"a\nb":                   "control",
		"a\u0085b":               "control", // NEL, Cc
		strings.Repeat("é", 192): "191",
	} {
		if msg := consumerNameProblem(bad); !strings.Contains(msg, want) {
			t.Errorf("consumerNameProblem(%q) = %q, want it to say %q", bad, msg, want)
		}
	}
}

// A new consumer name holds letters of one script, Common and Inherited
// characters (digits, spaces, punctuation, combining marks) aside, or one
// of the mixes UTS #39's "highly restrictive" level allows.
func TestMixedScriptsProblem(t *testing.T) {
	accepted := []string{
		"acme", "Zeta Corp", "M\u00fcller GmbH", "Acme 2 (EU) \u2013 \u00e9dition", "Mu\u0308ller", // Latin; a combining mark is Inherited
		"\u0430\u0441\u043c\u0435", "\u041e\u041e\u041e \u00ab\u0420\u043e\u043c\u0430\u0448\u043a\u0430\u00bb", // Cyrillic alone; its quotes are Common
		"\u0391\u03b8\u03ae\u03bd\u03b1 \u0391\u0395", "\u05e9\u05dc\u05d5\u05dd", "\u0645\u062a\u062c\u0631 \u0661\u0662", // Greek, Hebrew, Arabic with Arabic digits
		"\u682a\u5f0f\u4f1a\u793e\u30bd\u30cb\u30fc", "Sony \u30bd\u30cb\u30fc\u682a\u5f0f\u4f1a\u793e", "\u3072\u3089\u304c\u306a\u30ab\u30bf\u30ab\u30ca\u6f22\u5b57", // Japanese: Han, Katakana, Hiragana, Latin
		"\u4e2d\u6587 \u3105\u3106\u3107 ABC", // Chinese: Han, Bopomofo, Latin
		"\uc0bc\uc131 Samsung \u4e09\u661f",   // Korean: Hangul, Latin, Han
		"123", "--",                           // no letters at all
	}
	for _, name := range accepted {
		if msg := mixedScriptsProblem(name); msg != "" {
			t.Errorf("%q refused: %s", name, msg)
		}
	}
	refused := map[string]string{
		"\u0430cme":        "Cyrillic and Latin", // Cyrillic a among Latin cme
		"acm\u0435":        "Latin and Cyrillic",
		"p\u0430yp\u0430l": "Latin and Cyrillic",
		"\u0391pple":       "Greek and Latin", // Greek capital alpha
		"Zeta \u0421orp":   "Latin and Cyrillic",
		"\u30bd\u30cb\u30fc\u0421\u043e\u043d\u0438": "Katakana and Cyrillic",
		"\u3072\u3089\u304c\u306a \uc0bc\uc131":      "Hiragana and Hangul", // Japanese kana with Korean: no one mix holds both
		"\u4e2d\u6587 \u3105 \u30ab":                 "Han, Bopomofo and Katakana",
		"shop \u2116 1 \u05d0":                       "Latin and Hebrew", // the numero sign and the digit are Common
	}
	for name, want := range refused {
		if msg := mixedScriptsProblem(name); !strings.Contains(msg, "it mixes "+want+")") {
			t.Errorf("mixedScriptsProblem(%q) = %q, want it to name %s", name, msg, want)
		}
	}
}

func TestFoldKey(t *testing.T) {
	same := [][2]string{{"acme", "ACME"}, {"M\u00fcller GmbH", "M\u00dcLLER GMBH"}, {"Stra\u00dfe", "STRASSE"}, {"\u00fc", "U\u0308"}}
	for _, p := range same {
		if foldKey(p[0]) != foldKey(p[1]) {
			t.Errorf("%q and %q fold apart", p[0], p[1])
		}
	}
	for _, p := range [][2]string{{"muller gmbh", "M\u00fcller GmbH"}, {"acme", "acme2"}} {
		if foldKey(p[0]) == foldKey(p[1]) {
			t.Errorf("%q and %q fold alike", p[0], p[1])
		}
	}
}

func TestIssueRefusesBadConsumerNames(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		s := newTestService(db, testkit.NewClock(time.Now()), nil)
		ctx := context.Background()
		issue(t, s, "acme")
		for _, name := range []string{"\xffacme", "ac\u200bme", "ACME", "acme\u202e"} {
			_, err := s.Issue(ctx, audit.Console(), IssueInput{Consumer: name, Abilities: []string{LicensesRead}})
			var ve *fault.Fields
			if !errors.As(err, &ve) || len(ve.Fields["consumer"]) == 0 {
				t.Errorf("Issue(%q) = %v, want a validation error on consumer", name, err)
			}
		}
		if got := issue(t, s, " acme ").Consumer.Name; got != "acme" {
			t.Errorf("consumer = %q, want acme", got)
		}
		if c, err := s.ConsumerNamed(ctx, " acme"); err != nil || c.Name != "acme" {
			t.Errorf("ConsumerNamed = %v, %v", c, err)
		}
		if _, err := s.ConsumerNamed(ctx, "ACME"); !errors.Is(err, ErrConsumerNotFound) {
			t.Errorf("ConsumerNamed(ACME) = %v, want ErrConsumerNotFound", err)
		}
	})
}

func TestIssueRefusesTTLAboveMax(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		clk := testkit.NewClock(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC))
		s := New(Config{DB: db.Gorm, Key: make([]byte, 32), Issuer: "iss", DefaultTTL: time.Hour, MaxTTL: 90 * time.Minute, Now: clk.Now})
		ctx := context.Background()
		_, err := s.Issue(ctx, audit.Console(), IssueInput{Consumer: "acme", Abilities: []string{LicensesRead}, TTL: 91 * time.Minute})
		var ve *fault.Fields
		if !errors.As(err, &ve) || len(ve.Fields["expires_in"]) != 1 || !strings.Contains(ve.Fields["expires_in"][0], "1h30m") {
			t.Fatalf("Issue with TTL above MaxTTL = %v, want a validation error on expires_in naming 1h30m", err)
		}
		got, err := s.Issue(ctx, audit.Console(), IssueInput{Consumer: "acme", Abilities: []string{LicensesRead}, TTL: 90 * time.Minute})
		if err != nil || !got.ExpiresAt.Equal(clk.Now().Add(90*time.Minute)) {
			t.Fatalf("Issue with TTL = MaxTTL: %v, %v", got.ExpiresAt, err)
		}

		// A hand-made Config with a default above the cap gets the cap.
		s = New(Config{DB: db.Gorm, Key: make([]byte, 32), Issuer: "iss", DefaultTTL: 3 * time.Hour, MaxTTL: time.Hour, Now: clk.Now})
		if got := issue(t, s, "acme"); !got.ExpiresAt.Equal(clk.Now().Add(time.Hour)) {
			t.Errorf("ExpiresAt = %v, want the MaxTTL ahead", got.ExpiresAt)
		}
		// Zero MaxTTL: DefaultMaxTTL.
		s = New(Config{DB: db.Gorm, Key: make([]byte, 32), Issuer: "iss", DefaultTTL: time.Hour, Now: clk.Now})
		if _, err := s.Issue(ctx, audit.Console(), IssueInput{Consumer: "acme", Abilities: []string{LicensesRead}, TTL: DefaultMaxTTL + time.Second}); !errors.As(err, &ve) {
			t.Errorf("TTL above DefaultMaxTTL = %v, want a validation error", err)
		}
	})
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{8760 * time.Hour: "8760h", 90 * time.Minute: "1h30m", 90 * time.Second: "1m30s", time.Hour + time.Second: "1h0m1s"} {
		if got := formatDuration(d); got != want {
			t.Errorf("formatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}
