package request

import (
	"errors"
	"mime/multipart"
	"strings"
	"testing"
)

// FormJSON parses names as PHP does: [] appends, [n] and [k] index, the
// last of a repeated name wins, . and space in the top-level name are _,
// an unmatched [ is part of the name, %XX and + decode leniently, and an
// array with the keys 0…n-1 is a JSON array.
func TestFormJSONParsesAsPHP(t *testing.T) {
	for in, want := range map[string]string{
		"":                    `{}`,
		"a=1&b=2":             `{"a":"1","b":"2"}`,
		"a=1&a=2":             `{"a":"2"}`,
		"a[]=x&a[]=y":         `{"a":["x","y"]}`,
		"a%5B%5D=x&a%5B%5D=y": `{"a":["x","y"]}`,
		"a[0]=x&a[1]=y":       `{"a":["x","y"]}`,
		"a[1]=y&a[0]=x":       `{"a":{"1":"y","0":"x"}}`,
		"a[5]=x&a[]=y":        `{"a":{"5":"x","6":"y"}}`,
		"a[k]=v&a[j][]=w":     `{"a":{"k":"v","j":["w"]}}`,
		"a=1&a[]=2":           `{"a":["2"]}`,
		"a[]=1&a=2":           `{"a":"2"}`,
		"a.b=1&c+d=2":         `{"a_b":"1","c_d":"2"}`,
		"a[b=1":               `{"a_b":"1"}`,
		"a[b]x[c]=1":          `{"a":{"b":"1"}}`,
		"=x&[a]=y&&z":         `{"z":""}`,
		"q=a+b%20c%zz%4":      `{"q":"a b c%zz%4"}`,
		"q=%22%5C%0A":         `{"q":"\"\\\u000a"}`,
		"q=%C3%A9":            `{"q":"é"}`,
		"q=%FF":               "{\"q\":\"\xff\"}",
		"q[%FF]=1":            "{\"q\":{\"\xff\":\"1\"}}",
	} {
		got, err := FormJSON("application/x-www-form-urlencoded; charset=utf-8", []byte(in))
		if err != nil || string(got) != want {
			t.Errorf("%q = %s, %v; want %s", in, got, err, want)
		}
	}
}

// A multipart body reads its text parts like urlencoded pairs and its file
// parts as {}; one without a boundary, or cut short, is malformed.
func TestFormJSONMultipart(t *testing.T) {
	body := "--b\r\nContent-Disposition: form-data; name=\"a[]\"\r\n\r\nx\r\n" +
		"--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"x.png\"\r\nContent-Type: image/png\r\n\r\nPNG\r\n" +
		"--b\r\nContent-Disposition: form-data; name=\"a[]\"\r\n\r\ny\r\n--b--\r\n"
	got, err := FormJSON("multipart/form-data; boundary=b", []byte(body))
	if err != nil || string(got) != `{"a":["x","y"],"f":{}}` {
		t.Errorf("multipart = %s, %v", got, err)
	}
	for _, ct := range []string{"multipart/form-data", "multipart/form-data; boundary=c"} {
		if _, err := FormJSON(ct, []byte(body)); !errors.Is(err, ErrMalformedForm) {
			t.Errorf("%s: err = %v, want ErrMalformedForm", ct, err)
		}
	}
	if _, err := FormJSON("multipart/form-data; boundary=b", []byte(body[:60])); !errors.Is(err, ErrMalformedForm) {
		t.Errorf("a cut body: err = %v, want ErrMalformedForm", err)
	}
}

// A form of more than max_input_vars fields, or whose names nest more
// levels in all than the node budget, is refused rather than read: reading
// it would cost memory out of proportion to its size (forms are read
// before authentication), and dropping fields as PHP does would make two
// different bodies one intent. The deep form of a review (507 names 63
// levels deep, 65 KB) allocated 14 MB before.
func TestFormJSONBudget(t *testing.T) {
	const form = "application/x-www-form-urlencoded"
	many := strings.Repeat("a[]=1&", maxFormVars) + "b=2"
	if _, err := FormJSON(form, []byte(many)); !errors.Is(err, ErrFormTooLarge) {
		t.Errorf("%d fields: %v, want ErrFormTooLarge", maxFormVars+1, err)
	}
	if _, err := FormJSON(form, []byte(strings.Repeat("a[]=1&", maxFormVars))); err != nil {
		t.Errorf("%d fields: %v, want them read", maxFormVars, err)
	}
	deep := strings.Repeat("a"+strings.Repeat("[]", 63)+"=&", 507)
	if _, err := FormJSON(form, []byte(deep)); !errors.Is(err, ErrFormTooLarge) {
		t.Errorf("507 names 63 levels deep: %v, want ErrFormTooLarge", err)
	}
	allocs := testing.AllocsPerRun(3, func() { _, _ = FormJSON(form, []byte(deep)) })
	if allocs > 20000 {
		t.Errorf("refusing the deep form took %.0f allocations, want it cut short", allocs)
	}
	var b strings.Builder
	w := multipart.NewWriter(&b)
	for range maxFormVars + 1 {
		_ = w.WriteField("a[]", "1")
	}
	_ = w.Close()
	if _, err := FormJSON(w.FormDataContentType(), []byte(b.String())); !errors.Is(err, ErrFormTooLarge) {
		t.Errorf("a multipart form of %d fields: %v, want ErrFormTooLarge", maxFormVars+1, err)
	}
}

// IsForm names the two form media types, in any case and with parameters,
// and nothing else; a form type with malformed parameters is not one.
func TestIsForm(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/x-www-form-urlencoded":                true,
		"Application/X-WWW-Form-Urlencoded":                true,
		"Application/X-WWW-Form-Urlencoded; charset=UTF-8": true,
		"multipart/form-data; boundary=xyz":                true,
		" multipart/form-data ; boundary=xyz":              true,
		"multipart/form-data; boundary=":                   false,
		"application/json":                                 false,
		"application/json; charset=utf-8":                  false,
		"text/plain":                                       false,
		"":                                                 false,
		"multipart/form-data-ish":                          false,
	} {
		if got := IsForm(ct); got != want {
			t.Errorf("IsForm(%q) = %v, want %v", ct, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { IsForm("application/json") }); n != 0 {
		t.Errorf("IsForm of a JSON body allocates %.0f times, want none", n)
	}
}
