package request

import (
	"bytes"
	"encoding/json"
)

// MergeQuery merges a query string into a JSON body as Laravel's
// $request->input() does: the body's keys, then the query's (read as an
// urlencoded form, PHP's arrays included: a[]=x, a[0]=x) that the body
// does not have. A key the body has wins whole, whatever the query says
// under it (PHP's array union, body + query). An empty body is the query's
// object; a body that is not a JSON object is returned as it is, for the
// body checks to refuse as they would without the query. A query of more
// fields than a form may have is ErrFormTooLarge.
func MergeQuery(body []byte, rawQuery string) ([]byte, error) {
	b := bytes.TrimSpace(body)
	var have map[string]json.RawMessage
	if len(b) > 0 && (b[0] != '{' || json.Unmarshal(b, &have) != nil) {
		return body, nil
	}
	query := newFormNode()
	var budget formBudget
	if err := query.readURLEncoded(rawQuery, &budget); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if len(b) == 0 {
		query.write(&out, true)
		return out.Bytes(), nil
	}
	out.Write(b[:len(b)-1]) // the body without its closing brace
	sep := len(have) > 0
	for _, k := range query.keys {
		if _, ok := have[k]; ok {
			continue
		}
		if sep {
			out.WriteByte(',')
		}
		sep = true
		writeString(&out, k)
		out.WriteByte(':')
		query.writeValue(&out, k)
	}
	out.WriteByte('}')
	return out.Bytes(), nil
}
