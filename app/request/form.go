package request

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrMalformedForm: a form body that cannot be parsed (a multipart body
// without its boundary, or cut short); answered as 400 malformed_json.
var ErrMalformedForm = errors.New("the request body is not a valid form")

// maxFormDepth is PHP's max_input_nesting_level: a name nested deeper
// (a[b][c]… past 64 brackets) is dropped, as PHP drops it.
const maxFormDepth = 64

// maxFormVars is PHP's max_input_vars: a form of more fields is refused
// (PHP drops the rest; a dropped field would make two different bodies one
// intent). maxFormNodes bounds the nesting of all its names together
// (each [ a level), so that no body within the size limit costs more than
// a few thousand nodes to read, whoever sends it: forms are read before
// authentication.
const (
	maxFormVars  = 1000
	maxFormNodes = 4096
)

// ErrFormTooLarge: a form of more than maxFormVars fields, or of names
// nested more than maxFormNodes levels in all; answered as 400
// malformed_json, like a form that cannot be parsed.
var ErrFormTooLarge = errors.New("the form has too many fields")

// formBudget counts what a form's names cost as they are read.
type formBudget struct{ vars, nodes int }

// spend takes name's cost from the budget; false once it is spent.
func (b *formBudget) spend(name string) bool {
	b.vars++
	b.nodes += 1 + min(strings.Count(name, "["), maxFormDepth)
	return b.vars <= maxFormVars && b.nodes <= maxFormNodes
}

// IsForm reports whether contentType names a form body:
// application/x-www-form-urlencoded or multipart/form-data.
func IsForm(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	mt = strings.TrimSpace(mt)
	if !strings.EqualFold(mt, "application/x-www-form-urlencoded") && !strings.EqualFold(mt, "multipart/form-data") {
		return false // every JSON body: no parse, no allocation
	}
	_, _, err := mime.ParseMediaType(contentType)
	return err == nil
}

// FormJSON reads a form body as Laravel's $request->input() does and writes
// it as the one JSON object the API reads: names as PHP parses them
// (abilities[]=a&abilities[]=b and abilities[0]=a are the array ["a"…],
// a[k]=v the object {"k":"v"}, the last of a repeated name wins), every
// value a string. A multipart file part is an object ({}), never its bytes:
// where a route reads a string or an array it is that field's type error,
// elsewhere it is ignored like any unknown field. Bytes that are not valid
// UTF-8 are kept as they are, so the JSON checks refuse them (422 on the
// field) instead of reading them replaced.
func FormJSON(contentType string, body []byte) ([]byte, error) {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return nil, ErrMalformedForm
	}
	root := newFormNode()
	var budget formBudget
	switch mt {
	case "application/x-www-form-urlencoded":
		if err := root.readURLEncoded(string(body), &budget); err != nil {
			return nil, err
		}
	case "multipart/form-data":
		boundary := params["boundary"]
		if boundary == "" {
			return nil, ErrMalformedForm
		}
		r := multipart.NewReader(bytes.NewReader(body), boundary)
		for {
			part, err := r.NextRawPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, ErrMalformedForm
			}
			name := part.FormName()
			if !budget.spend(name) {
				return nil, ErrFormTooLarge
			}
			if part.FileName() != "" {
				root.set(name, formFile{})
				continue
			}
			v, err := io.ReadAll(part)
			if err != nil {
				return nil, ErrMalformedForm
			}
			root.set(name, string(v))
		}
	default:
		return nil, ErrMalformedForm
	}
	var b bytes.Buffer
	root.write(&b, true)
	return b.Bytes(), nil
}

// readURLEncoded sets the fields of an urlencoded form (a body, or a
// query string) in n, as PHP's parse_str does.
func (n *formNode) readURLEncoded(form string, budget *formBudget) error {
	for pair := range strings.SplitSeq(form, "&") {
		if pair == "" {
			continue
		}
		name, value, _ := strings.Cut(pair, "=")
		name = unescape(name)
		if !budget.spend(name) {
			return ErrFormTooLarge
		}
		n.set(name, unescape(value))
	}
	return nil
}

// formFile is a multipart file part: written as {}.
type formFile struct{}

// formNode is a PHP array: its keys in insertion order, and the next
// integer key [] appends under.
type formNode struct {
	keys []string
	vals map[string]any // string, formFile or *formNode
	next int
}

func newFormNode() *formNode { return &formNode{vals: map[string]any{}} }

// set assigns value under name as PHP's variable registration does.
func (n *formNode) set(name string, value any) {
	name = strings.TrimLeft(name, " ")
	base, rest, hasIndex := strings.Cut(name, "[")
	if base == "" {
		return // PHP ignores a variable without a name
	}
	// PHP writes . and space in the top-level name as _.
	base = strings.NewReplacer(".", "_", " ", "_").Replace(base)
	path := []string{base}
	if hasIndex {
		rest = "[" + rest
		for strings.HasPrefix(rest, "[") {
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				if len(path) == 1 { // an unmatched first [ is part of the name: a[b=1 is a_b
					path[0] += "_" + rest[1:]
				}
				break
			}
			path = append(path, rest[1:end])
			rest = rest[end+1:]
		}
	}
	if len(path) > maxFormDepth {
		return
	}
	node := n
	for i, key := range path {
		if key == "" && i > 0 { // [] appends
			key = strconv.Itoa(node.next)
		}
		if i == len(path)-1 {
			node.put(key, value)
			return
		}
		child, ok := node.vals[key].(*formNode)
		if !ok {
			child = newFormNode()
			node.put(key, child)
		}
		node = child
	}
}

// put stores v under key, keeping the key's first position.
func (n *formNode) put(key string, v any) {
	if _, ok := n.vals[key]; !ok {
		n.keys = append(n.keys, key)
	}
	n.vals[key] = v
	if i, err := strconv.Atoi(key); err == nil && strconv.Itoa(i) == key && i >= n.next {
		n.next = i + 1
	}
}

// isList reports whether the node's keys are 0…n-1 in order: a JSON array,
// as PHP's json_encode writes such an array.
func (n *formNode) isList() bool {
	for i, k := range n.keys {
		if k != strconv.Itoa(i) {
			return false
		}
	}
	return true
}

// write writes the node as JSON; the top level is always an object.
func (n *formNode) write(b *bytes.Buffer, top bool) {
	list := !top && len(n.keys) > 0 && n.isList()
	if list {
		b.WriteByte('[')
	} else {
		b.WriteByte('{')
	}
	for i, k := range n.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		if !list {
			writeString(b, k)
			b.WriteByte(':')
		}
		n.writeValue(b, k)
	}
	if list {
		b.WriteByte(']')
	} else {
		b.WriteByte('}')
	}
}

// writeValue writes the value under key k as JSON.
func (n *formNode) writeValue(b *bytes.Buffer, k string) {
	switch v := n.vals[k].(type) {
	case string:
		writeString(b, v)
	case formFile:
		b.WriteString("{}")
	case *formNode:
		v.write(b, false)
	}
}

// writeString writes s as a JSON string, escaping what JSON requires and
// keeping every other byte as it is (bytes that are not valid UTF-8
// included, for the checks to refuse).
func writeString(b *bytes.Buffer, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xF])
		case c < utf8.RuneSelf:
			b.WriteByte(c)
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b.WriteByte(c) // invalid: kept raw
			} else {
				b.WriteString(s[i : i+size])
			}
			i += size
			continue
		}
		i++
	}
	b.WriteByte('"')
}

// unescape decodes a form name or value as PHP's urldecode does: + is a
// space, %XX a byte, and a % not followed by two hex digits stays as it is.
func unescape(s string) string {
	if !strings.ContainsAny(s, "+%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '%' && i+2 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		if c == '+' {
			c = ' '
		}
		b.WriteByte(c)
	}
	return b.String()
}
