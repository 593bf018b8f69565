package http

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/labstack/echo/v4"
)

var (
	errMalformedJSON = &Error{Status: http.StatusBadRequest, Message: "The request body is not valid JSON.", Code: "malformed_json"}
	errNotJSON       = &Error{Status: http.StatusUnsupportedMediaType, Message: "The request body must be JSON (Content-Type: application/json).", Code: "unsupported_media_type"}
)

// readBody reads the whole request body (the body limit applies).
func readBody(c echo.Context) ([]byte, error) {
	b, err := io.ReadAll(c.Request().Body)
	if errors.Is(err, errTooLarge) {
		return nil, errTooLarge
	}
	if err != nil {
		return nil, errMalformedJSON
	}
	return b, nil
}

// bindJSON decodes a JSON object body into v. Unknown fields are ignored;
// a value of the wrong type is a validation error on its field.
func bindJSON(c echo.Context, v any) error {
	if err := checkJSONType(c); err != nil {
		return err
	}
	b, err := readBody(c)
	if err != nil {
		return err
	}
	return decodeJSON(b, v)
}

// checkJSONType refuses a body whose Content-Type says it is not JSON.
func checkJSONType(c echo.Context) error {
	if ct := c.Request().Header.Get(echo.HeaderContentType); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !hasJSONSuffix(mt)) {
			return errNotJSON
		}
	}
	return nil
}

// decodeJSON decodes a body already read, as bindJSON does.
func decodeJSON(b []byte, v any) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' || !json.Valid(b) {
		return errMalformedJSON
	}
	err := json.Unmarshal(b, v)
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		field := typeErr.Field
		return validationError(map[string][]string{field: {fmt.Sprintf("The %s field must be %s.", field, jsonKind(typeErr.Type.Kind().String()))}})
	}
	if err != nil {
		return errMalformedJSON
	}
	return nil
}

// decodeObject reads a body that must be one JSON object into its fields,
// undecoded, so each field's type can be checked on its own.
func decodeObject(b []byte) (map[string]json.RawMessage, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' || !json.Valid(b) {
		return nil, errMalformedJSON
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, errMalformedJSON
	}
	return raw, nil
}

// stringField reads the string field name of raw into dst: absent or null
// leaves dst "" (the rules decide whether that is allowed); any other JSON
// type is Laravel's "must be a string." message, returned.
func stringField(raw map[string]json.RawMessage, name string, dst *string) string {
	v, ok := raw[name]
	if !ok || string(v) == "null" {
		return ""
	}
	if v[0] != '"' || json.Unmarshal(v, dst) != nil {
		return "The " + name + " field must be a string."
	}
	return ""
}

func hasJSONSuffix(mt string) bool {
	return len(mt) > 5 && mt[len(mt)-5:] == "+json"
}

// jsonKind is Laravel's wording for the type a field must have.
func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "slice", "array", "struct", "map":
		return "an array"
	case "bool":
		return "true or false"
	}
	return "a number"
}
