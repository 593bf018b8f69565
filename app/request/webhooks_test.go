package request

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestMergeFieldsOrdersItemsByIndex(t *testing.T) {
	types := &FieldsError{}
	for _, f := range []string{"description", "events.10", "events.2", "url"} {
		types.Add(f, "x")
	}
	domain := &FieldsError{Fields: map[string][]string{"events": {"y"}, "url": {"The url field is required."}}}
	err := MergeFields(types, domain, CreateEndpointRules)
	var fe *FieldsError
	if e, ok := err.(*FieldsError); ok {
		fe = e
	}
	if fe == nil {
		t.Fatalf("MergeFields = %v, want a *FieldsError", err)
	}
	if want := []string{"url", "events", "description", "events.2", "events.10"}; !slices.Equal(fe.Order, want) {
		t.Errorf("order = %v, want %v", fe.Order, want)
	}
	if got := fe.Fields["url"]; !slices.Equal(got, []string{"x"}) {
		t.Errorf("url = %v: the type error stands in for the domain's message on an empty url", got)
	}
}

func TestLaravelBoolean(t *testing.T) {
	for raw, want := range map[string]bool{`true`: true, `false`: false, `1`: true, `0`: false, `"1"`: true, `"0"`: false, `" 1 "`: true} {
		if got, ok := laravelBoolean(json.RawMessage(raw)); !ok || got != want {
			t.Errorf("%s = %v, %v; want %v", raw, got, ok, want)
		}
	}
	for _, raw := range []string{`"true"`, `"false"`, `2`, `null`, `""`, `"yes"`, `[]`} {
		if _, ok := laravelBoolean(json.RawMessage(raw)); ok {
			t.Errorf("%s is a boolean to Laravel's rule? It is not", raw)
		}
	}
}
