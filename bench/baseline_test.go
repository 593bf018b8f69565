package main

import (
	"io"
	"testing"
)

func TestParseBaseline(t *testing.T) {
	for _, c := range []struct{ in, base, against string }{
		{"", "", ""},
		{"abc123", "abc123", ""},
		{"a0bfb14^", "a0bfb14^", ""},
		{"dcf3169^..dcf3169", "dcf3169^", "dcf3169"},
	} {
		base, against, err := parseBaseline(c.in)
		if err != nil || base != c.base || against != c.against {
			t.Errorf("parseBaseline(%q) = %q, %q, %v; want %q, %q", c.in, base, against, err, c.base, c.against)
		}
	}
	for _, bad := range []string{"..x", "x..", "--upload-pack=x", "a..-b"} {
		if _, _, err := parseBaseline(bad); err == nil {
			t.Errorf("parseBaseline(%q) accepted", bad)
		}
	}
	if _, err := parseFlags([]string{"-only", "baseline"}, io.Discard); err == nil {
		t.Error("-only baseline without -baseline accepted")
	}
	if o, err := parseFlags([]string{"-only", "baseline", "-baseline", "a..b"}, io.Discard); err != nil || o.baseline != "a" || o.against != "b" {
		t.Errorf("-baseline a..b: %+v, %v", o, err)
	}
}

// -batch sets the batched rate limit cases' RATE_LIMIT_BATCH: 16 unless
// given, from 2 (1 is the unbatched case) to 1000 (RATE_LIMIT_BATCH's most).
func TestBatchFlag(t *testing.T) {
	if o, err := parseFlags(nil, io.Discard); err != nil || o.batch != 16 {
		t.Errorf("default: %d, %v; want 16", o.batch, err)
	}
	if o, err := parseFlags([]string{"-batch", "6"}, io.Discard); err != nil || o.batch != 6 {
		t.Errorf("-batch 6: %d, %v", o.batch, err)
	}
	for _, bad := range []string{"1", "0", "1001"} {
		if _, err := parseFlags([]string{"-batch", bad}, io.Discard); err == nil {
			t.Errorf("-batch %s accepted", bad)
		}
	}
}
