package request

import "testing"

// MergeQuery writes PHP's body + query: the body's bytes as they are, then
// the query's keys the body lacks, in the query's order; a key the body has
// wins whole.
func TestMergeQuery(t *testing.T) {
	for _, c := range []struct{ body, query, want string }{
		{``, `name=Q&domain=q.test`, `{"name":"Q","domain":"q.test"}`},
		{" \n", `a[]=x&a[]=y`, `{"a":["x","y"]}`},
		{`{}`, `a%5B0%5D=x`, `{"a":["x"]}`},
		{`{"domain":"b.test"}`, `domain=q.test&name=Q`, `{"domain":"b.test","name":"Q"}`},
		{`{"a":["b"],"n":null}`, `a[]=x&a[]=y&n=1&z=2`, `{"a":["b"],"n":null,"z":"2"}`},
		{` {"x":1} `, `k[a]=v`, `{"x":1,"k":{"a":"v"}}`},
		{`{"x":`, `y=1`, `{"x":`},
		{`[1]`, `y=1`, `[1]`},
		{`"s"`, `y=1`, `"s"`},
	} {
		got, err := MergeQuery([]byte(c.body), c.query)
		if err != nil || string(got) != c.want {
			t.Errorf("MergeQuery(%q, %q) = %s, %v; want %s", c.body, c.query, got, err, c.want)
		}
	}
	many := "a=1"
	for range maxFormVars {
		many += "&a=1"
	}
	if _, err := MergeQuery([]byte(`{}`), many); err != ErrFormTooLarge {
		t.Errorf("a query of more than %d fields: %v, want ErrFormTooLarge", maxFormVars, err)
	}
}
