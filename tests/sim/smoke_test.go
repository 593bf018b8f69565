package sim

import (
	"testing"
	"testing/synctest"
)

func TestSmoke(t *testing.T) {
	tp := theTemplate(t)
	synctest.Test(t, func(t *testing.T) {
		path := copyTemplate(t)
		defer removeDB(path)
		v := newVendor(nil)
		p, err := start(0, path, v)
		if err != nil {
			t.Fatal(err)
		}
		a := p.do("POST", "/api/licenses", `{"name":"A","domain":"a.test"}`, "Authorization", "Bearer "+tp.tokens["alpha"], "Idempotency-Key", "k1")
		t.Logf("%+v", a)
		a = p.do("POST", "/api/licenses", `{"name":"A","domain":"a.test"}`, "Authorization", "Bearer "+tp.tokens["alpha"], "Idempotency-Key", "k1")
		t.Logf("%+v", a)
		p.closePools()
		p.stop()
	})
}
