package tests

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// A reader for the subset of YAML that compose.yaml and deploy/*.yml are
// written in, so that the deploy test needs no YAML module: block mappings
// and sequences, plain and quoted scalars, one-line flow sequences ([a, b]),
// the empty mapping {}, comments, and anchors (&name) on mapping values with
// aliases (*name) and merge keys (<<: *name). Every scalar is a string.
// Anything else (block scalars, flow mappings, tabs, multiple documents) is
// an error naming the line, never a silent misreading: the files are kept
// within this subset.

type yamlLine struct {
	n      int // 1-based line number in the source
	indent int
	text   string
}

type yamlReader struct {
	lines   []yamlLine
	pos     int
	anchors map[string]any
}

// parseYAML reads src into map[string]any, []any, string and nil values.
func parseYAML(src string) (any, error) {
	r := &yamlReader{anchors: map[string]any{}}
	for i, raw := range strings.Split(src, "\n") {
		line := strings.TrimRight(stripYAMLComment(raw), " \r")
		text := strings.TrimLeft(line, " ")
		if text == "" || (i == 0 && text == "---") {
			continue
		}
		if strings.HasPrefix(text, "\t") {
			return nil, fmt.Errorf("line %d: a tab in the indentation", i+1)
		}
		if text == "---" || text == "..." {
			return nil, fmt.Errorf("line %d: one document only", i+1)
		}
		r.lines = append(r.lines, yamlLine{n: i + 1, indent: len(line) - len(text), text: text})
	}
	if len(r.lines) == 0 {
		return nil, nil
	}
	v, err := r.node(r.lines[0].indent)
	if err == nil && r.pos < len(r.lines) {
		err = fmt.Errorf("line %d: unexpected indentation", r.lines[r.pos].n)
	}
	return v, err
}

// stripYAMLComment cuts a # comment (at the start, or after a space) that
// is outside quotes.
func stripYAMLComment(s string) string {
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' && quote == '"' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			if i == 0 || strings.ContainsRune(" [,:-", rune(s[i-1])) {
				quote = c
			}
		case c == '#' && (i == 0 || s[i-1] == ' '):
			return s[:i]
		}
	}
	return s
}

func isSeqItem(text string) bool { return text == "-" || strings.HasPrefix(text, "- ") }

// node reads the mapping or sequence whose lines start at indent.
func (r *yamlReader) node(indent int) (any, error) {
	if isSeqItem(r.lines[r.pos].text) {
		return r.sequence(indent)
	}
	return r.mapping(indent)
}

func (r *yamlReader) mapping(indent int) (any, error) {
	m := map[string]any{}
	var merges []map[string]any
	for r.pos < len(r.lines) {
		l := r.lines[r.pos]
		if l.indent < indent || (l.indent == indent && isSeqItem(l.text)) {
			break
		}
		if l.indent > indent {
			return nil, fmt.Errorf("line %d: unexpected indentation", l.n)
		}
		key, rest, ok := splitYAMLKey(l.text)
		if !ok {
			return nil, fmt.Errorf("line %d: want key: value, got %q", l.n, l.text)
		}
		r.pos++
		anchor := ""
		if strings.HasPrefix(rest, "&") {
			anchor, rest, _ = strings.Cut(rest[1:], " ")
			rest = strings.TrimSpace(rest)
		}
		var val any
		var err error
		if rest == "" {
			if r.pos < len(r.lines) {
				next := r.lines[r.pos]
				if next.indent > indent || (next.indent == indent && isSeqItem(next.text)) {
					val, err = r.node(next.indent)
				}
			}
		} else {
			val, err = r.scalar(rest, l.n)
		}
		if err != nil {
			return nil, err
		}
		if anchor != "" {
			r.anchors[anchor] = val
		}
		if key == "<<" {
			mm, ok := val.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("line %d: << merges a mapping only", l.n)
			}
			merges = append(merges, mm)
			continue
		}
		if _, dup := m[key]; dup {
			return nil, fmt.Errorf("line %d: key %q twice", l.n, key)
		}
		m[key] = val
	}
	for _, mm := range merges { // keys written out win over merged ones
		for k, v := range mm {
			if _, ok := m[k]; !ok {
				m[k] = v
			}
		}
	}
	return m, nil
}

func (r *yamlReader) sequence(indent int) (any, error) {
	s := []any{}
	for r.pos < len(r.lines) {
		l := r.lines[r.pos]
		if l.indent < indent || (l.indent == indent && !isSeqItem(l.text)) {
			break
		}
		if l.indent > indent {
			return nil, fmt.Errorf("line %d: unexpected indentation", l.n)
		}
		item := strings.TrimLeft(strings.TrimPrefix(l.text, "-"), " ")
		var val any
		var err error
		switch _, _, isMap := splitYAMLKey(item); {
		case item == "":
			r.pos++
			if r.pos < len(r.lines) && r.lines[r.pos].indent > indent {
				val, err = r.node(r.lines[r.pos].indent)
			}
		case isMap: // "- key: value" opens a mapping indented where key starts
			at := indent + len(l.text) - len(item)
			r.lines[r.pos] = yamlLine{n: l.n, indent: at, text: item}
			val, err = r.mapping(at)
		default:
			r.pos++
			val, err = r.scalar(item, l.n)
		}
		if err != nil {
			return nil, err
		}
		s = append(s, val)
	}
	return s, nil
}

// splitYAMLKey splits "key: rest" (or "key:"); a quoted key may hold colons.
func splitYAMLKey(text string) (key, rest string, ok bool) {
	if text == "" || strings.ContainsRune("[{&*|>!%@`", rune(text[0])) {
		return "", "", false
	}
	from := 0
	if text[0] == '"' || text[0] == '\'' {
		end := strings.IndexByte(text[1:], text[0])
		if end < 0 {
			return "", "", false
		}
		from = end + 2
	}
	for i := from; i < len(text); i++ {
		if text[i] == ':' && (i+1 == len(text) || text[i+1] == ' ') {
			if from > 0 && i != from {
				return "", "", false
			}
			key = text[:i]
			if from > 0 {
				key = text[1 : from-1]
			}
			return key, strings.TrimSpace(text[i+1:]), true
		}
	}
	return "", "", false
}

// scalar reads a value written on its key's or item's line.
func (r *yamlReader) scalar(s string, n int) (any, error) {
	switch s[0] {
	case '*':
		v, ok := r.anchors[s[1:]]
		if !ok {
			return nil, fmt.Errorf("line %d: no anchor %q before its alias", n, s[1:])
		}
		return v, nil
	case '[':
		if !strings.HasSuffix(s, "]") {
			return nil, fmt.Errorf("line %d: a flow sequence must close on its line", n)
		}
		items := []any{}
		inner := strings.TrimSpace(s[1 : len(s)-1])
		if inner == "" {
			return items, nil
		}
		for _, part := range splitFlow(inner) {
			part = strings.TrimSpace(part)
			if part == "" || strings.ContainsRune("[{*&", rune(part[0])) {
				return nil, fmt.Errorf("line %d: flow sequences of scalars only", n)
			}
			v, err := r.scalar(part, n)
			if err != nil {
				return nil, err
			}
			items = append(items, v)
		}
		return items, nil
	case '{':
		if s == "{}" {
			return map[string]any{}, nil
		}
		return nil, fmt.Errorf("line %d: flow mappings are not read here; write a block mapping", n)
	case '|', '>':
		return nil, fmt.Errorf("line %d: block scalars are not read here", n)
	case '&', '!', '%', '@', '`':
		return nil, fmt.Errorf("line %d: %q is not read here", n, s)
	case '"':
		if len(s) < 2 || !strings.HasSuffix(s, `"`) {
			return nil, fmt.Errorf("line %d: unterminated double quote", n)
		}
		return strings.NewReplacer(`\"`, `"`, `\\`, `\`, `\n`, "\n", `\t`, "\t").Replace(s[1 : len(s)-1]), nil
	case '\'':
		if len(s) < 2 || !strings.HasSuffix(s, `'`) {
			return nil, fmt.Errorf("line %d: unterminated single quote", n)
		}
		return strings.ReplaceAll(s[1:len(s)-1], "''", "'"), nil
	}
	if s == "~" || s == "null" {
		return nil, nil
	}
	return s, nil
}

// splitFlow splits a flow sequence's inside on the commas outside quotes.
func splitFlow(s string) []string {
	var parts []string
	var quote byte
	start := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quote != 0:
			if c == '\\' && quote == '"' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == ',':
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

// The reader reads what the deploy files use, and refuses what it does not
// read rather than misreading it.
func TestDeployYAMLReader(t *testing.T) {
	src := `# a comment
x-env: &env
  A: "1"   # trailing comment
  B: 'it''s'
x-base: &base
  image: licensor:local
  read_only: true
services:
  one:
    <<: *base
    read_only: false
    environment: *env
    command: ["serve", "--flag", 'x, y']
    ports:
      - "127.0.0.1:8080-8081:8080"
    depends_on:
      db:
        condition: service_healthy
  two:
    healthcheck:
      test: ["CMD", "healthcheck.sh", "--connect"]
    list:
    - a
    - b: c
      d: "#not a comment"
    empty: {}
    nothing:
volumes:
  data: {}
`
	got, err := parseYAML(src)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"x-env":  map[string]any{"A": "1", "B": "it's"},
		"x-base": map[string]any{"image": "licensor:local", "read_only": "true"},
		"services": map[string]any{
			"one": map[string]any{
				"image": "licensor:local", "read_only": "false",
				"environment": map[string]any{"A": "1", "B": "it's"},
				"command":     []any{"serve", "--flag", "x, y"},
				"ports":       []any{"127.0.0.1:8080-8081:8080"},
				"depends_on":  map[string]any{"db": map[string]any{"condition": "service_healthy"}},
			},
			"two": map[string]any{
				"healthcheck": map[string]any{"test": []any{"CMD", "healthcheck.sh", "--connect"}},
				"list":        []any{"a", map[string]any{"b": "c", "d": "#not a comment"}},
				"empty":       map[string]any{},
				"nothing":     nil,
			},
		},
		"volumes": map[string]any{"data": map[string]any{}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseYAML =\n%#v\nwant\n%#v", got, want)
	}
	for _, bad := range []string{
		"a: |\n  text\n",
		"a: {b: c}\n",
		"a:\n\tb: c\n",
		"a: b\n  c: d\n",
		"a: *nowhere\n",
		"a: 1\na: 2\n",
		"a: [b, [c]]\n",
		"a: \"open\n",
		"a: 1\n---\nb: 2\n",
	} {
		if v, err := parseYAML(bad); err == nil {
			t.Errorf("parseYAML(%q) = %#v, want an error", bad, v)
		}
	}
}
