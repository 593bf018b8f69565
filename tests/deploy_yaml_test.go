package tests

import (
	"fmt"

	"go.yaml.in/yaml/v4"
)

// parseYAML reads compose.yaml or deploy/*.yml into map[string]any, []any,
// string and nil values: anchors, aliases and merge keys resolved, and every
// scalar a string (true, 2 and 9100 read as "true", "2" and "9100"), as the
// deploy test compares them.
func parseYAML(src string) (any, error) {
	var v any
	if err := yaml.Unmarshal([]byte(src), &v); err != nil {
		return nil, err
	}
	return yamlStrings(v), nil
}

// yamlStrings turns every scalar below v but nil into its string.
func yamlStrings(v any) any {
	switch v := v.(type) {
	case nil, string:
		return v
	case map[string]any:
		for k, item := range v {
			v[k] = yamlStrings(item)
		}
		return v
	case []any:
		for i, item := range v {
			v[i] = yamlStrings(item)
		}
		return v
	}
	return fmt.Sprint(v)
}
