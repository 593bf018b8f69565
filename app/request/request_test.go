package request

import (
	"slices"
	"testing"

	"github.com/licensor-api/licensor/internal/fault"
)

// ValidText refuses what encoding/json would read as U+FFFD: a bad byte,
// and an escaped lone surrogate; an escaped pair, an escaped U+FFFD and
// other escapes are text.
func TestValidText(t *testing.T) {
	for in, want := range map[string]bool{
		`"plain"`:                 true,
		`"caf\u00e9 \"q\" \\u"`:   true,
		`"\ud83d\ude00 pair"`:     true,
		`"\uD83D\uDE00 upper"`:    true,
		`"\ufffd given"`:          true,
		`"\\ud800 not an escape"`: true,
		"\"bad \xff byte\"":       false,
		`"\ud800 alone"`:          false,
		`"\udbff"`:                false,
		`"\udfff low first"`:      false,
		`"\ud83d\u0041 not low"`:  false,
		`"\ud83d\n"`:              false,
		`"\u12"`:                  false,
		`"\u12zz"`:                false,
	} {
		if got := ValidText([]byte(in)); got != want {
			t.Errorf("ValidText(%s) = %v, want %v", in, got, want)
		}
	}
}

// A field holding an escaped lone surrogate is refused as invalid UTF-8,
// by bindString and by InvalidUTF8Field.
func TestLoneSurrogateIsInvalidUTF8(t *testing.T) {
	raw, err := Object([]byte(`{"name":"\ud800y","domain":"a.test"}`))
	if err != nil {
		t.Fatal(err)
	}
	var name string
	var verr fault.Fields
	if bindString(raw, &verr, "name", false, &name) || !slices.Equal(verr.Fields["name"], []string{InvalidUTF8("name")}) || name != "" {
		t.Errorf("bindString = %v, %q; want the UTF-8 message", verr.Fields, name)
	}
	if got := InvalidUTF8Field([]byte(`{"consumer":"\udfff","name":"ok"}`)); got != "consumer" {
		t.Errorf("InvalidUTF8Field = %q, want consumer", got)
	}
}
